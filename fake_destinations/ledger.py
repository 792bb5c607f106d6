"""The effect ledger: durable ground truth of what the fake destinations received and committed.

One SQLite file per scenario run (WAL mode), written by the destination process and read by the
harness after the run. Tables ``requests`` and ``effects`` follow docs/ARCHITECTURE.md exactly; the
destinations' own state (stored idempotency keys, resources, the virtual clock) lives in extra
tables of the same file, so that a restarted destination keeps its keys and its numbering.

The file is on disk where the agent under test (a process of the same user) could edit it, so its rows are
tamper-evident: each ``requests`` and ``effects`` row carries ``mac``, an HMAC-SHA256 of the row (its seq
included) under a key the harness hands the destination process over its stdin and never writes down, tagged
with who wrote it (``destinations``, or ``probe`` for a container's effects listed by the harness). Seqs run
1, 2, 3... with no gap, so a row removed from the middle is a hole; the writer counts the rows it wrote
(``Ledger.rows``), so a tail cut off, a table cleared or a file rolled back to an earlier copy holds fewer than
that. ``verify_ledger`` says which of these happened; the harness refuses to judge such a ledger.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract import CLIENT_REFERENCE_FIELD, LEDGER_DB_FILE, LEDGER_DUMP_FILE

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    destination TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    query TEXT,
    idempotency_key TEXT,
    client_reference TEXT,
    payload_fingerprint TEXT,
    flow_id TEXT,
    traceparent TEXT,
    status INTEGER,
    outcome TEXT NOT NULL,
    effect_ref TEXT,
    received_at REAL NOT NULL,
    kind TEXT,                           -- the operation kind the request's route serves (null: a read, or no route)
    params TEXT,                         -- JSON: the request's parameters as the destination parsed them
    sender TEXT,                         -- refused at the gate: agent | other | null (fake_destinations.peer)
    mac TEXT                             -- "writer:hex": the row's signature (module docstring)
);
CREATE TABLE IF NOT EXISTS effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    destination TEXT NOT NULL,
    effect_ref TEXT NOT NULL,
    kind TEXT NOT NULL,
    operation_key TEXT,
    client_reference TEXT,
    payload_fingerprint TEXT,
    request_seq INTEGER REFERENCES requests(seq),
    flow_id TEXT,
    replay INTEGER NOT NULL DEFAULT 0,
    committed_at REAL NOT NULL,
    committed_params TEXT,               -- JSON: the parameters the destination committed (null: not said)
    mac TEXT                             -- "writer:hex": the row's signature (module docstring)
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    destination TEXT NOT NULL,
    scoped_key TEXT NOT NULL,
    payload_fingerprint TEXT,
    state TEXT NOT NULL,               -- in_progress | done
    status INTEGER,
    body TEXT,
    effect_ref TEXT,
    created_at REAL NOT NULL,          -- destination clock (virtual)
    PRIMARY KEY (destination, scoped_key)
);
CREATE TABLE IF NOT EXISTS resources (
    destination TEXT NOT NULL,
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    client_reference TEXT,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,          -- destination clock (virtual)
    PRIMARY KEY (destination, collection, id)
);
CREATE TABLE IF NOT EXISTS counters (
    destination TEXT NOT NULL,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (destination, name)
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_STATE_TABLES = ("requests", "effects", "idempotency_keys", "resources", "counters", "meta")
SIGNED_TABLES = ("requests", "effects")  # the ground truth the checker reads; the rest is the destinations' state
DESTINATIONS_WRITER = "destinations"  # rows the destination process wrote (``Ledger``)
PROBE_WRITER = "probe"  # rows the harness wrote for a container service (``EffectWriter``)


def row_mac(key: bytes, table: str, row: Mapping[str, Any], writer: str) -> str:
    """The signature of one ledger row as SQLite holds it (every column but ``mac``, its seq included)."""
    body = json.dumps([table, writer, {k: v for k, v in row.items() if k != "mac"}], sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str).encode()
    return f"{writer}:{hmac.new(key, body, hashlib.sha256).hexdigest()}"


def _sign(db: sqlite3.Connection, key: bytes | None, table: str, seq: int, writer: str) -> None:
    """Sign row ``seq`` of ``table`` as it now stands (inside the writer's transaction)."""
    if key is None:
        return
    cur = db.execute(f"SELECT * FROM {table} WHERE seq = ?", (seq,))
    names = [d[0] for d in cur.description]
    row = dict(zip(names, cur.fetchone(), strict=True))
    db.execute(f"UPDATE {table} SET mac = ? WHERE seq = ?", (row_mac(key, table, row, writer), seq))


def signed_rows(db: sqlite3.Connection, writer: str) -> dict[str, int]:
    """How many rows of each signed table say ``writer`` wrote them (a restarted writer's count so far)."""
    return {table: db.execute(f"SELECT COUNT(*) FROM {table} WHERE mac LIKE ?", (writer + ":%",)).fetchone()[0]
            for table in SIGNED_TABLES}


def verify_ledger(path: str | os.PathLike[str], key: bytes, written: Mapping[str, Mapping[str, int]],
                  *, most: int = 5) -> list[str]:
    """What was done to a ledger behind its writers' backs, as sentences (empty: every row is as written).
    ``written``: writer -> table -> how many rows that writer wrote (what each reported at the end of the run).
    Says at most ``most`` rows a table, then how many more."""
    problems: list[str] = []
    # read-write, as ``_read``: a read-only connection to a WAL file leaves its -wal and -shm files behind
    db = sqlite3.connect(Path(path), timeout=5.0)
    try:
        db.row_factory = sqlite3.Row
        for table in SIGNED_TABLES:
            bad: list[str] = []
            counted: dict[str, int] = {}
            expected_seq = 1
            for record in db.execute(f"SELECT * FROM {table} ORDER BY seq"):
                row = dict(record)
                seq = row["seq"]
                what = f"{table} row seq {seq} ({row.get('destination')}"
                what += f", {row['effect_ref']})" if table == "effects" else f", {row.get('method')} {row.get('path')})"
                if seq != expected_seq:
                    bad.append(f"{table} rows seq {expected_seq}-{seq - 1} are missing: removed after they were "
                               f"written" if seq > expected_seq else f"{what} is out of sequence")
                expected_seq = seq + 1
                mac = row.get("mac")
                writer = mac.split(":", 1)[0] if isinstance(mac, str) else None
                if writer is None or not isinstance(mac, str):
                    bad.append(f"{what} carries no signature: no writer of the run wrote it")
                elif not hmac.compare_digest(row_mac(key, table, row, writer), mac):
                    bad.append(f"{what} is not the row its writer signed: it was edited after it was written")
                else:
                    counted[writer] = counted.get(writer, 0) + 1
            for writer, tables in written.items():
                want, have = tables.get(table, 0), counted.get(writer, 0)
                if have < want:
                    bad.append(f"{table}: the {writer} wrote {want} row(s) and {have} are there: {want - have} "
                               f"removed (the table cut short, cleared or rolled back to an earlier copy)")
                elif have > want:
                    bad.append(f"{table}: {have} row(s) signed by the {writer}, which wrote {want}: rows replayed "
                               f"from elsewhere")
            for writer in sorted(set(counted) - set(written)):
                bad.append(f"{table}: {counted[writer]} row(s) signed as {writer!r}, a writer this run did not have")
            problems += bad[:most] + ([f"{table}: and {len(bad) - most} more"] if len(bad) > most else [])
    finally:
        db.close()
    return problems


class Ledger:
    """Writer side, used inside the destination process (one connection, one event loop thread). ``key``:
    the rows' signing key (module docstring); ``rows`` counts the signed rows this ledger holds by its
    writer's own account (those found at start, from a process before a restart, plus those written since)."""

    def __init__(self, path: str | os.PathLike[str], key: bytes | None = None) -> None:
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        # NORMAL keeps commits durable across a process kill (WAL), which is what a restart needs.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        # A request that was in flight when the previous process died never finished: unlock its key.
        self.db.execute("DELETE FROM idempotency_keys WHERE state = 'in_progress'")
        self.rows = signed_rows(self.db, DESTINATIONS_WRITER)
        self.sealed = False

    def seal(self) -> dict[str, int]:
        """The rows this ledger holds by its writer's own account; and from now until ``clear``, no more rows. The
        run is over: what reaches the destination after its account (a neighbour's probe of the port, a request
        that arrives late) is not the run's, and a row landing between the account and the copy held to it
        would read as replayed from elsewhere (``verify_ledger``): the run would not be judged."""
        self.sealed = True
        return dict(self.rows)

    def record(self, request: dict[str, Any], effects: Sequence[dict[str, Any]] = ()) -> int:
        """Append one received request and the effects it committed, atomically; returns its seq (0: the ledger
        is sealed, nothing was written)."""
        if self.sealed:
            return 0
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute(
                "INSERT INTO requests (destination, method, path, query, idempotency_key,"
                " client_reference, payload_fingerprint, flow_id, traceparent, status, outcome,"
                " effect_ref, received_at, kind, params, sender) VALUES (:destination, :method, :path, :query,"
                " :idempotency_key, :client_reference, :payload_fingerprint, :flow_id, :traceparent,"
                " :status, :outcome, :effect_ref, :received_at, :kind, :params, :sender)",
                {**{k: request.get(k) for k in ("destination", "method", "path", "query", "idempotency_key",
                                                "client_reference", "payload_fingerprint", "flow_id",
                                                "traceparent", "status", "outcome", "effect_ref",
                                                "received_at", "kind", "sender")},
                 "params": json.dumps(request["params"], sort_keys=True, default=str)
                 if request.get("params") is not None else None})
            seq = cur.lastrowid
            assert seq is not None  # set by every successful INSERT
            _sign(self.db, self.key, "requests", seq, DESTINATIONS_WRITER)
            now = time.time()
            for effect in effects:
                row = self.db.execute(
                    "INSERT INTO effects (destination, effect_ref, kind, operation_key, client_reference,"
                    " payload_fingerprint, request_seq, flow_id, replay, committed_at, committed_params)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                    (request["destination"], effect["effect_ref"], effect["kind"],
                     request.get("idempotency_key"), request.get("client_reference"),
                     request.get("payload_fingerprint"), seq, request.get("flow_id"), now,
                     json.dumps(effect["params"], sort_keys=True, default=str)
                     if effect.get("params") is not None else None))
                assert row.lastrowid is not None
                _sign(self.db, self.key, "effects", row.lastrowid, DESTINATIONS_WRITER)
        self.rows["requests"] += 1
        self.rows["effects"] += len(effects)
        return seq

    # -- destination state -------------------------------------------------------------------

    def next_number(self, destination: str, name: str) -> int:
        """Next value of a per-destination counter (resource numbering survives restarts)."""
        row = self.db.execute(
            "INSERT INTO counters (destination, name, value) VALUES (?, ?, 1)"
            " ON CONFLICT(destination, name) DO UPDATE SET value = value + 1 RETURNING value",
            (destination, name)).fetchone()
        return int(row[0])

    def get_key(self, destination: str, scoped_key: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM idempotency_keys WHERE destination = ? AND scoped_key = ?",
                               (destination, scoped_key)).fetchone()

    def lock_key(self, destination: str, scoped_key: str, payload_fingerprint: str | None, now: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO idempotency_keys (destination, scoped_key,"
                        " payload_fingerprint, state, created_at) VALUES (?, ?, ?, 'in_progress', ?)",
                        (destination, scoped_key, payload_fingerprint, now))

    def finish_key(self, destination: str, scoped_key: str, status: int, body: Any,
                   effect_ref: str | None, now: float) -> None:
        """The key's first request completed: its answer is stored, and its retention runs from now."""
        self.db.execute("UPDATE idempotency_keys SET state = 'done', status = ?, body = ?, effect_ref = ?,"
                        " created_at = ? WHERE destination = ? AND scoped_key = ?",
                        (status, json.dumps(body), effect_ref, now, destination, scoped_key))

    def drop_key(self, destination: str, scoped_key: str) -> None:
        self.db.execute("DELETE FROM idempotency_keys WHERE destination = ? AND scoped_key = ?",
                        (destination, scoped_key))

    def put_resource(self, destination: str, collection: str, rid: str, body: Any, created_at: float, *,
                     client_reference: str | None = None) -> None:
        """Store a resource's body (a JSON value; a generic destination's may be XML text); its client
        reference is the body's field unless given."""
        if client_reference is None and isinstance(body, dict):
            client_reference = body.get(CLIENT_REFERENCE_FIELD)
        self.db.execute("INSERT OR REPLACE INTO resources (destination, collection, id, client_reference,"
                        " body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (destination, collection, rid, client_reference, json.dumps(body), created_at))

    def get_resource(self, destination: str, collection: str, rid: str) -> Any:
        row = self.db.execute("SELECT body FROM resources WHERE destination = ? AND collection = ? AND id = ?",
                              (destination, collection, rid)).fetchone()
        return json.loads(row[0]) if row else None

    def delete_resource(self, destination: str, collection: str, rid: str) -> None:
        self.db.execute("DELETE FROM resources WHERE destination = ? AND collection = ? AND id = ?",
                        (destination, collection, rid))

    def find_resources(self, destination: str, collection: str, client_reference: str | None,
                       visible_before: float) -> list[Any]:
        sql = ("SELECT body FROM resources WHERE destination = ? AND collection = ? AND created_at <= ?")
        args: list[Any] = [destination, collection, visible_before]
        if client_reference is not None:
            sql += " AND client_reference = ?"
            args.append(client_reference)
        return [json.loads(r[0]) for r in self.db.execute(sql + " ORDER BY created_at, id", args)]

    def get_meta(self, name: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else default

    def set_meta(self, name: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    def clear(self) -> None:
        """Forget everything: ledger rows, keys, resources, counters, clock (between tests)."""
        with self.db:
            for table in _STATE_TABLES:
                self.db.execute(f"DELETE FROM {table}")
            self.db.execute("DELETE FROM sqlite_sequence WHERE name IN ('requests', 'effects')")
        self.rows = dict.fromkeys(SIGNED_TABLES, 0)
        self.sealed = False

    def close(self) -> None:
        self.db.close()


class EffectWriter:
    """Appends effect rows that no request row of the ledger committed: a container destination's, listed by
    its ledger probe (``harness.containers.probe``). Unlike ``Ledger`` it touches nothing else, so it may write
    into the live ledger of a destination process that is running (SQLite's WAL lets both write). Its rows are
    signed with ``key`` as the ``probe``'s; the caller counts them (``verify_ledger``'s ``written``)."""

    def __init__(self, path: str | os.PathLike[str], key: bytes | None = None) -> None:
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def add(self, effect: dict[str, Any]) -> int:
        """One effect row (``request_seq`` null: the harness did not see the request inside the service); its seq."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute(
                "INSERT INTO effects (destination, effect_ref, kind, operation_key, client_reference,"
                " payload_fingerprint, request_seq, flow_id, replay, committed_at, committed_params)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, 0, ?, ?)",
                (effect["destination"], effect["effect_ref"], effect["kind"], effect.get("operation_key"),
                 effect.get("client_reference"), effect.get("payload_fingerprint"), effect.get("flow_id"),
                 effect["committed_at"], json.dumps(effect["committed_params"], sort_keys=True, default=str)
                 if effect.get("committed_params") is not None else None))
            seq = cur.lastrowid
            assert seq is not None  # set by every successful INSERT
            _sign(self.db, self.key, "effects", seq, PROBE_WRITER)
        return seq

    def add_read(self, request: dict[str, Any]) -> int:
        """One read a container destination answered (outcome ``read``, no effect: a read commits nothing); its seq."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute(
                "INSERT INTO requests (destination, method, path, query, idempotency_key, client_reference,"
                " payload_fingerprint, flow_id, traceparent, status, outcome, effect_ref, received_at, kind, params)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, 'read', NULL, ?, NULL, NULL)",
                (request["destination"], request["method"], request["path"], request.get("query"),
                 request.get("idempotency_key"), request.get("client_reference"), request.get("flow_id"),
                 request.get("traceparent"), request.get("status"), request["received_at"]))
            seq = cur.lastrowid
            assert seq is not None
            _sign(self.db, self.key, "requests", seq, PROBE_WRITER)
        return seq

    def set_flow(self, seq: int, flow_id: str) -> None:
        """The flow that committed effect ``seq`` (a row this writer's kind wrote), found after the run (the
        proxy journal's): signed again as it now stands."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("UPDATE effects SET flow_id = ? WHERE seq = ?", (flow_id, seq))
            _sign(self.db, self.key, "effects", seq, PROBE_WRITER)

    def close(self) -> None:
        self.db.close()


def _read(path: str | os.PathLike[str], table: str) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"effect ledger {p} does not exist (did the destinations start?)")
    db = sqlite3.connect(p, timeout=5.0)
    try:
        return _rows(db, table)
    finally:
        db.close()


def _rows(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    db.row_factory = sqlite3.Row
    # the signatures are the ledger's own defence (verify_ledger), not evidence the checker reads
    return [{k: row[k] for k in row.keys() if k != "mac"} for row in db.execute(f"SELECT * FROM {table} ORDER BY seq")]


def read_effects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every committed effect, in commit order, as plain dicts (columns of the ``effects`` table)."""
    return _read(path, "effects")


def read_requests(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every request the destinations received, in arrival order (columns of ``requests``)."""
    return _read(path, "requests")


def count_effects(path: str | os.PathLike[str]) -> int:
    """How many effects a live ledger holds so far (0 while it does not exist yet); cheap enough to
    poll while the destinations run."""
    p = Path(path)
    if not p.is_file():
        return 0
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return 0
    try:
        return db.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
    except sqlite3.Error:  # the destination has not created its tables yet
        return 0
    finally:
        db.close()


def copy_ledger(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """A consistent copy of a live ledger (the destination process may still hold it open), written as a new
    file renamed over ``target`` (``harness.safe_files``: nothing left at that name is written through); returns
    the copy's ``effects`` and ``requests`` rows, read from memory, never back from the folder."""
    from harness.safe_files import write_file

    src = sqlite3.connect(f"file:{Path(source)}?mode=ro", uri=True, timeout=5.0)
    try:
        copy = sqlite3.connect(":memory:")
        try:
            src.backup(copy)
            data = copy.serialize()
            rows = {table: _rows(copy, table) for table in ("effects", "requests")}
        finally:
            copy.close()
    finally:
        src.close()
    write_file(target, data)
    return rows


def save_run_ledger(source: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                    recovered: str | None = None) -> list[dict[str, Any]]:
    """Put a run's ledger into its evidence ``folder``: a consistent copy of the live SQLite file and
    its rows as JSON (the checker reads those), written last and atomically. ``recovered`` says who
    saved it when the harness could not (kept in the JSON, so the evidence says so). Returns the effects."""
    from harness.safe_files import write_file

    folder = Path(folder)
    # the rows of the copy as it was made, not read back from the folder: the agent can write there too
    rows = copy_ledger(source, folder / LEDGER_DB_FILE)
    effects = rows["effects"]
    dump: dict[str, Any] = {"effects": effects, "requests": rows["requests"]}
    if recovered:
        dump["recovered_by"] = recovered
    write_file(folder / LEDGER_DUMP_FILE, json.dumps(dump, indent=2, default=str) + "\n")
    return effects
