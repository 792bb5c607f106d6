"""Real loopback servers for the instrumentation's unit tests, each connection served one scripted way."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, STATE_DIR_ENV, destination_env_name

# A client's bound on a loopback server that answers: never what a test measures, so roomy enough that six busy test
# workers on two cores do not turn a prompt answer into a read timeout (1 s did, once in a run).
ANSWER_WITHIN = 10.0


@dataclass
class Reply:
    """What the server does with one connection, once it has read the whole request."""

    status: int = 201
    body: Any = None  # JSON-able, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    action: str = "answer"  # answer | close (read, then close without a word) | hang | truncate
    declared_length: int | None = None  # truncate: the Content-Length announced (more than is sent)


class Server:
    """Accepts connections on 127.0.0.1 and serves each with the next scripted reply (the last one repeats).
    ``requests`` holds (method, path, headers, body) of every request read."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.release = threading.Event()  # a hanging connection is held until this is set
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._served = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            reply = self.replies[min(self._served, len(self.replies) - 1)]
            self._served += 1
            threading.Thread(target=self._handle, args=(conn, reply), daemon=True).start()

    def _handle(self, conn: socket.socket, reply: Reply) -> None:
        with conn:
            try:
                self.requests.append(_read_request(conn))
            except OSError:
                return
            if reply.action == "close":
                return
            if reply.action == "hang":
                self.release.wait(30)
                return
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            length = reply.declared_length if reply.action == "truncate" else len(body)
            head = [f"HTTP/1.1 {reply.status} X", f"Content-Length: {length}", "Connection: close",
                    "Content-Type: application/json", *(f"{k}: {v}" for k, v in reply.headers.items())]
            conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def close(self) -> None:
        self.release.set()
        self.sock.close()


def _read_request(conn: socket.socket) -> tuple[str, str, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("closed before the request ended")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += conn.recv(65536)
    return method, path, headers, body


@contextmanager
def serving(replies: list[Reply]) -> Iterator[Server]:
    server = Server(replies)
    try:
        yield server
    finally:
        server.close()


def refused_port() -> int:
    """A port nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CONTRACT: dict[str, Any] = {
    "service": "tickets",
    "idempotency": {"style": "stripe", "header": "Idempotency-Key", "body_field": None,
                    "retention_seconds": 86400.0, "scope": "global", "required": False},
    "lookup": {"method": "GET", "path": "/tickets", "query_param": "client_reference", "result_field": "items",
               "lag_seconds": 0.0},
    "operations": {"create_ticket": {"method": "POST", "path": "/tickets", "client_reference_field":
                                     "client_reference", "effect_ref_field": "id",
                                     "required_params": ["title"]}},
}
INTENT: dict[str, Any] = {"intent_id": "printer-on-fire", "kind": "create_ticket", "destination": "tickets",
                          "params": {"title": "Printer on fire"}, "supersedes": None, "delegate_to_worker": False}


def harness_env(tmp: Path, url: str, contract: dict[str, Any] | None = None,
                intents: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """The environment the harness gives an agent, for one destination ``tickets`` at ``url``."""
    (tmp / "state").mkdir(exist_ok=True)
    path = tmp / "intents.json"
    path.write_text(json.dumps({"intents": intents if intents is not None else [INTENT],
                                "destinations": {"tickets": contract or CONTRACT}}))
    return {INTENTS_ENV: str(path), AUDIT_LOG_ENV: str(tmp / "agent.ndjson"), STATE_DIR_ENV: str(tmp / "state"),
            destination_env_name("tickets"): url}


def events(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "agent.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
