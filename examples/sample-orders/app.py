"""A team's orders service, as a stand-in for a real one: the semantics of harness/apis/orders.yaml, served
the way the fake `api: orders` destination serves them, with its own state in SQLite on disk.

    POST /orders                       create an order (an effect): 201 {id, item, quantity, client_reference,
                                       status: placed}; item and quantity required (else 400)
        Idempotency-Key (optional)     Stripe-like: the first answer is stored and replayed (Idempotent-Replayed:
                                       true); the same key with another payload is refused 422
                                       idempotency_key_reused; while the first request runs, 409
    GET /orders/{id}                   one order, or 404
    GET /orders?client_reference=X     {"items": [orders tagged X]}
    GET /healthz                       200 once the database is open
    GET /_effects                      {"items": [every committed order, as the harness's ledger probe reads it]}

Its state is in SQLite on disk, or in PostgreSQL (a database container beside it).
Errors are {"error": CODE, "message": TEXT}. Ids are ord_0001, ord_0002... numbered in the database, so a
restarted service goes on counting. It imports nothing of the harness: it is what a team would ship.
ORDERS_CRASH_AFTER_COMMITS=N makes it crash (exit 3, no answer) right after its Nth commit: how the harness's
tests make a service that is gone when its effects are listed.

    python app.py [--port 8080] [--host 0.0.0.0] [--db /data/orders.db]     (or PORT, ORDERS_DB)
    python app.py --db postgresql://postgres@db/postgres                    (Dockerfile.postgres: psycopg2)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

IDEMPOTENCY_HEADER = "Idempotency-Key"
FLOW_HEADER = "X-Harness-Flow"  # the fault proxy's flow id on what it forwards; kept with the order when present
RETENTION_SECONDS = float(os.environ.get("ORDERS_KEY_RETENTION_SECONDS", "86400"))
CRASH_AFTER_COMMITS = int(os.environ.get("ORDERS_CRASH_AFTER_COMMITS", "0"))  # 0: never
REQUIRED = ("item", "quantity")
ORDER_PATH = re.compile(r"^/orders/(?P<id>[^/]+)$")

# one schema for both engines (SQLite 3.35+ and PostgreSQL read the same upsert and RETURNING); only the key differs
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    n {serial},
    id TEXT NOT NULL UNIQUE,
    client_reference TEXT,
    body TEXT NOT NULL,
    params TEXT NOT NULL,
    idempotency_key TEXT,
    harness_flow TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,          -- in_progress | done
    status INTEGER,
    body TEXT,
    headers TEXT,
    completed_at DOUBLE PRECISION
);
"""


class Database:
    """SQLite on disk (a path), or PostgreSQL (a postgresql:// URL, through Debian's python3-psycopg2): the
    statements are written once, with ``?`` placeholders."""

    def __init__(self, target: str, *, wait_seconds: float = 60.0) -> None:
        self.postgres = target.startswith(("postgresql://", "postgres://"))
        if self.postgres:
            import psycopg2  # the image of the PostgreSQL variant installs it (Dockerfile.postgres)

            deadline = time.monotonic() + wait_seconds
            while True:  # the database's container may still be starting
                try:
                    self.conn: Any = psycopg2.connect(target)
                    break
                except psycopg2.OperationalError as exc:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"cannot reach the database at {target}: {exc}") from None
                    time.sleep(0.2)
            self.conn.autocommit = True
            serial = "BIGSERIAL PRIMARY KEY"
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(target, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            serial = "INTEGER PRIMARY KEY AUTOINCREMENT"
        for statement in SCHEMA.format(serial=serial).split(";"):
            if statement.strip():
                self.execute(statement)

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        if self.postgres:
            cur = self.conn.cursor()
            cur.execute(sql.replace("?", "%s"), args)
            return cur
        return self.conn.execute(sql, args)

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        return self.execute(sql, args).fetchone()

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        return list(self.execute(sql, args).fetchall())


def fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


class Orders:
    def __init__(self, db: Database) -> None:
        self.db = db
        # a request in progress when the previous process died never finished: its key is free again
        self.db.execute("DELETE FROM idempotency_keys WHERE state = 'in_progress'")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        path, method = request.path, request.method
        if path == "/healthz" and method == "GET":
            return web.json_response({"ok": True})
        if path == "/_effects" and method == "GET":
            return web.json_response({"items": self.effects()})
        if path == "/orders":
            if method == "POST":
                return await self.create(request)
            if method == "GET":
                ref = request.query.get("client_reference")
                return web.json_response({"items": self.find(ref)})
            return error(405, "method_not_allowed", f"{method} {path}; allowed: GET, POST")
        match = ORDER_PATH.match(path)
        if match:
            if method != "GET":
                return error(405, "method_not_allowed", f"{method} {path}; allowed: GET")
            row = self.db.one("SELECT body FROM orders WHERE id = ?", (match["id"],))
            if row is None:
                return error(404, "not_found", f"no create_order resource {match['id']!r}")
            return web.json_response(json.loads(row[0]))
        return error(404, "not_found", f"no route {method} {path}")

    async def create(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body: Any = {}
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return error(400, "invalid_json", "request body is not JSON")
            if not isinstance(body, dict):
                return error(400, "invalid_json", "request body must be a JSON object")
        params = {**request.query, **body}
        printed = fingerprint(params)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None:
            stored = self.db.one("SELECT fingerprint, state, status, body, headers, completed_at FROM "
                                 "idempotency_keys WHERE key = ?", (key,))
            if stored is not None and stored[1] == "done" and time.time() >= stored[5] + RETENTION_SECONDS:
                self.db.execute("DELETE FROM idempotency_keys WHERE key = ?", (key,))
                stored = None
            if stored is not None:
                if stored[1] == "in_progress":
                    return error(409, "idempotency_key_in_use", "a request with this key is still being processed")
                if stored[0] != printed:
                    return error(422, "idempotency_key_reused", "the key was already used with another payload")
                headers = {**json.loads(stored[4]), "Idempotent-Replayed": "true"}
                return web.json_response(json.loads(stored[3]), status=stored[2], headers=headers)
        missing = [name for name in REQUIRED if params.get(name) in (None, "")]
        if missing:
            return error(400, "invalid_request", f"missing required field(s): {', '.join(missing)}")
        if key is not None:
            self.db.execute("INSERT INTO idempotency_keys (key, fingerprint, state) VALUES (?, ?, 'in_progress') "
                            "ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, "
                            "state = excluded.state, status = NULL, body = NULL, headers = NULL, completed_at = NULL",
                            (key, printed))
        try:
            status, answer, headers = self.commit(params, key, request.headers.get(FLOW_HEADER))
        except BaseException:
            if key is not None:
                self.db.execute("DELETE FROM idempotency_keys WHERE key = ?", (key,))
            raise
        if key is not None:
            self.db.execute("UPDATE idempotency_keys SET state = 'done', status = ?, body = ?, headers = ?, "
                            "completed_at = ? WHERE key = ?",
                            (status, json.dumps(answer), json.dumps(headers), time.time(), key))
        return web.json_response(answer, status=status, headers=headers)

    def commit(self, params: dict[str, Any], key: str | None, flow: str | None) -> tuple[int, Any, dict[str, str]]:
        self.db.execute("BEGIN" if self.db.postgres else "BEGIN IMMEDIATE")
        try:
            (n,) = self.db.one("INSERT INTO orders (id, client_reference, body, params, idempotency_key, harness_flow, "
                               "created_at) VALUES (?, ?, '', ?, ?, ?, ?) RETURNING n",
                               (f"pending-{uuid.uuid4().hex}", params.get("client_reference"), json.dumps(params), key,
                                flow, time.time()))
            order = {"id": f"ord_{n:04d}", "item": params.get("item"), "quantity": params.get("quantity"),
                     "client_reference": params.get("client_reference"), "status": "placed"}
            self.db.execute("UPDATE orders SET id = ?, body = ? WHERE n = ?", (order["id"], json.dumps(order), n))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        print(f"committed {order['id']} key={key} flow={flow}", flush=True)
        if CRASH_AFTER_COMMITS and n >= CRASH_AFTER_COMMITS:
            print(f"crashing after commit {n} (ORDERS_CRASH_AFTER_COMMITS={CRASH_AFTER_COMMITS})", flush=True)
            os._exit(3)
        return 201, order, {"Request-Id": f"req_{uuid.uuid4().hex[:20]}"}

    def find(self, client_reference: str | None) -> list[Any]:
        sql, args = "SELECT body FROM orders", ()
        if client_reference is not None:
            sql, args = sql + " WHERE client_reference = ?", (client_reference,)
        return [json.loads(r[0]) for r in self.db.all(sql + " ORDER BY created_at, id", args)]

    def effects(self) -> list[dict[str, Any]]:
        rows = self.db.all("SELECT id, client_reference, params, idempotency_key, harness_flow, created_at "
                           "FROM orders ORDER BY n")
        return [{"id": r[0], "kind": "order_created", "client_reference": r[1], "params": json.loads(r[2]),
                 "idempotency_key": r[3], "harness_flow": r[4], "committed_at": r[5]} for r in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument("--db", default=os.environ.get("ORDERS_DB", "/data/orders.db"),
                        help="a SQLite file, or a postgresql:// URL (ORDERS_DB)")
    args = parser.parse_args(argv)
    orders = Orders(Database(args.db))
    print(f"sample-orders listening on {args.host}:{args.port}, database {args.db}", flush=True)
    web.run_app(orders.app(), host=args.host, port=args.port, print=None, access_log=None,
                handle_signals=True)


if __name__ == "__main__":
    main(sys.argv[1:])
