"""The recorder a Python agent uses to append audit events to the audit log the harness names.

Each call writes one JSON line and flushes it, so a crash loses nothing already recorded. The
recorder does not decide anything for the agent; it only makes the contract's field names easy to
get right. With ``chain=True`` every event also carries ``seq``, ``prev_hash`` and ``hash`` (see
``harness.chain``); a recorder reopened on the same file continues the chain, so an agent restart
does not break it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from harness.contract import AUDIT_LOG_ENV, EVENT_NAMES


def logged_records(path: str | os.PathLike[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(event, id) -> the record, of what an audit log already holds (operations and resolutions by
    operation id, attempts by attempt id): a restarted agent reads it to learn where the dead run stopped.
    Lines that are no event are skipped (the checker reports them, not the agent)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    path = Path(path)
    if not path.exists():
        return found
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            event = record.get("event")
            key = record.get("attempt_id") if event == "attempt" else record.get("operation_id")
            if isinstance(event, str) and isinstance(key, str):
                found[(event, key)] = record
    return found


def new_id(prefix: str) -> str:
    """A short random id with a readable prefix, e.g. ``op_3f2a9c1d0b7e``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class Recorder:
    """Appends audit events (NDJSON) to one file."""

    def __init__(self, path: str | os.PathLike[str], *, session_id: str | None = None,
                 chain: bool = False) -> None:
        self.path = Path(path)
        self.session_id = session_id or new_id("ses")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.chain = chain
        self._seq, self._prev_hash = 0, ""
        if chain:
            from harness.chain import last_link

            self._seq, self._prev_hash = last_link(self.path)
        self._file = self.path.open("a", encoding="utf-8")

    @property
    def head(self) -> str | None:
        """``seq:hash`` of the last chained event: keep it where the agent cannot write, to verify the log
        later with ``--head`` (the log may grow) or, once the log is complete, ``--final-head``."""
        return f"{self._seq}:{self._prev_hash}" if self.chain else None

    @classmethod
    def from_env(cls) -> Recorder:
        """The recorder for the log the harness named in the environment (``contract.AUDIT_LOG_ENV``)."""
        return cls(os.environ[AUDIT_LOG_ENV])

    def emit(self, event: str, operation_id: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENT_NAMES:
            raise ValueError(f"unknown audit event {event!r}; valid: {', '.join(EVENT_NAMES)}")
        record: dict[str, Any] = {"event": event, "ts": time.time(), "session_id": self.session_id,
                  "operation_id": operation_id}
        record.update({k: v for k, v in fields.items() if v is not None})
        if self.chain:
            from harness.chain import link

            self._seq += 1
            link(record, self._seq, self._prev_hash)
            self._prev_hash = record["hash"]
        self._file.write(json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")
        self._file.flush()
        return record

    def operation(self, operation_id: str, **fields: Any) -> dict[str, Any]:
        return self.emit("operation", operation_id, state="open", **fields)

    def attempt(self, operation_id: str, attempt_id: str, dispatch_state: str, **fields: Any) -> dict[str, Any]:
        return self.emit("attempt", operation_id, attempt_id=attempt_id,
                         dispatch_state=dispatch_state, **fields)

    def observation(self, operation_id: str, observation_id: str, **fields: Any) -> dict[str, Any]:
        return self.emit("observation", operation_id, observation_id=observation_id, **fields)

    def resolution(self, operation_id: str, state: str, **fields: Any) -> dict[str, Any]:
        return self.emit("resolution", operation_id, state=state, **fields)

    def approval(self, operation_id: str, approval_id: str, **fields: Any) -> dict[str, Any]:
        return self.emit("approval", operation_id, approval_id=approval_id, **fields)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
