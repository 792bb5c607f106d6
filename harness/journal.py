"""The proxy journal: one NDJSON line per flow that crossed the fault proxy.

Written as it happens (append + flush per line), so a crash loses nothing already seen. Fields, in
the order docs/ARCHITECTURE.md fixes them: ``seq``, ``flow_id``, ``ts_request``, ``ts_done``,
``destination``, ``method``, ``path``, ``query``, ``headers`` (secrets redacted), ``body_fingerprint``,
``idempotency_key``, ``traceparent``, ``rule_id``, ``fault``, ``forwarded``, ``upstream_status``,
``client_outcome``, ``client_status``; plus ``forward_count`` (2 for a duplicated delivery), ``rpc``
(a JSON-RPC request, an MCP message: ``{"method", "id", "tool", "is_error"}``, ``is_error`` read from
the result the client received, null when it got none; null for any other flow) and ``fault_note``
(why the fault could not act as declared, e.g. a tool error action on a flow that is no tools/call) and
``process_killed`` (``{"pid", "command", "ts"}``: the process that sent the request, killed by
``kill_sender_after_commit`` after the commit; null for any other flow).

Secrets never reach the file: Authorization, Cookie, Proxy-Authorization and Set-Cookie values, and
any header value equal to or containing a given secret, become ``redacted:sha256:<first 12 hex>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.ndjson import NdjsonError, read_objects

FIELDS = ("seq", "flow_id", "ts_request", "ts_done", "destination", "method", "path", "query",
          "headers", "body_fingerprint", "idempotency_key", "traceparent", "rule_id", "fault",
          "forwarded", "upstream_status", "client_outcome", "client_status", "client_retry_after",
          "forward_count", "rpc", "fault_note", "process_killed")
# in_flight_at_end: the scenario ended (the agent had exited) while the flow was still in flight
IN_FLIGHT_AT_END = "in_flight_at_end"
CLIENT_OUTCOMES = ("response", "connection_closed", "connection_reset", "refused", "timeout", IN_FLIGHT_AT_END)
SECRET_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization", "set-cookie"})


class JournalError(NdjsonError):
    """Raised by :func:`read_journal` when a line is not a JSON object (names file and line)."""


def redaction(value: str) -> str:
    """The stand-in written instead of a secret: enough to correlate, useless to an attacker."""
    return "redacted:sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12]


def redact_headers(headers: Iterable[tuple[str, str]], secrets: Iterable[str] = ()) -> dict[str, str]:
    """Headers as a dict (lower-case names; repeats joined by ', ') with every secret redacted."""
    known = [s for s in secrets if s]
    out: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        if name in SECRET_HEADERS:
            value = redaction(value)
        else:
            for secret in known:
                if secret in value:
                    value = value.replace(secret, redaction(secret))
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


class JournalWriter:
    """Appends journal entries to one NDJSON file it creates (never one already there, never through a symlink:
    ``harness.safe_files.create_new``); thread-safe, flushed per line.

    ``seal_key``: the run's key (``harness.chain``), handed to the proxy over its pipe. The writer keeps the
    digest of every byte it wrote, so ``seal()`` signs what it wrote, not what the file holds by then: a line the
    agent edits, adds or cuts while the run goes on no longer matches."""

    def __init__(self, path: str | os.PathLike[str], *, seal_key: bytes | None = None,
                 seal_kind: str = "run") -> None:
        from harness.safe_files import create_new

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = create_new(self.path)
        self._lock = threading.Lock()
        self._seq = 0
        self._seal_key, self._seal_kind = seal_key, seal_kind
        self._digest = hashlib.sha256()
        self._bytes = 0

    def write(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """Write one flow; ``seq`` is assigned here. Unknown keys are an error (the contract is fixed)."""
        unknown = set(entry) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown journal field(s) {sorted(unknown)}; valid: {', '.join(FIELDS)}")
        outcome = entry.get("client_outcome")
        if outcome is not None and outcome not in CLIENT_OUTCOMES:
            raise ValueError(f"client_outcome {outcome!r} is not one of {', '.join(CLIENT_OUTCOMES)}")
        with self._lock:
            if self._file.closed:
                raise ValueError(f"journal {self.path} is closed")
            self._seq += 1
            record = {k: entry.get(k) for k in FIELDS}
            record["seq"] = self._seq
            if record["forward_count"] is None:
                record["forward_count"] = 1 if record.get("forwarded") else 0
            line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
            self._file.write(line)
            self._file.flush()
            self._digest.update(line)
            self._bytes += len(line)
            return record

    def seal(self) -> dict[str, Any] | None:
        """The journal's signed checkpoint (``harness.chain.seal``) of every line written so far; None without a
        key."""
        if self._seal_key is None:
            return None
        from harness.chain import seal

        with self._lock:
            return seal(self.path.name, self._bytes, "sha256:" + self._digest.hexdigest(), None, self._seal_key,
                        self._seal_kind)

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_journal(path: str | os.PathLike[str], strings: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """All entries of a journal, each with ``_line`` (1-based line number). A missing file is empty. ``strings``:
    shared with the rest of the evidence (``harness.ndjson.share_strings``)."""
    try:
        return read_objects(path, what="proxy journal", strings=strings)
    except NdjsonError as exc:
        raise JournalError(str(exc)) from None
