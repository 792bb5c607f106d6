"""The second article's effect-ledger NDJSON (``type``: attempt | effect) read as audit events.

A line carries ``operationId``, ``attemptId``, ``idempotencyKey``, ``payloadHash``, ``result``,
``effectRef`` and ``observedAt``; the transport ``result`` is mapped to a dispatch state. A record
made from one says so (``_format: "ledger"``, the operation format the rules read), so that
``check()`` judges it as the audit does.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import from_json

from harness.ndjson import limit_error

# Transport results of the article's format, mapped to dispatch states.
NOT_SENT_WORDS = frozenset({"not_sent", "refused", "connection_refused", "blocked"})
ARTICLE_TYPES = ("attempt", "effect")  # the ``type`` of its lines
UNKNOWN_WORDS = frozenset({"timeout", "timed_out", "no_response", "lost", "unknown", "ambiguous", "sent_no_response"})


def article_record(raw: dict[str, Any], line: int) -> tuple[dict[str, Any] | None, str | None]:
    """One line of the article's effect ledger as an event the rules understand (or an error)."""
    kind = raw.get("type")
    op = raw.get("operationId")
    if not isinstance(op, str) or not op:
        return None, f"{kind} line has no string operationId"
    if kind == "attempt":
        attempt_id = raw.get("attemptId")
        if not isinstance(attempt_id, str) or not attempt_id:
            return None, "attempt line has no string attemptId"
        for name in ("idempotencyKey", "payloadHash", "result"):
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                return None, f"attempt line: {name} must be a string or null, got {json.dumps(value)}"
        result = str(raw.get("result") or "").lower()
        state = ("not_sent" if result in NOT_SENT_WORDS else "sent_no_response" if result in UNKNOWN_WORDS
                 else "response_received")
        return {"event": "attempt", "operation_id": op, "attempt_id": attempt_id, "dispatch_state": state,
                "idempotency_key": raw.get("idempotencyKey"), "request_fingerprint": raw.get("payloadHash"),
                "result": raw.get("result"), "ts": raw.get("observedAt"), "_line": line, "_format": "ledger"}, None
    ref = raw.get("effectRef")
    if not isinstance(ref, str) or not ref:
        return None, "effect line has no string effectRef"
    return {"event": "effect", "operation_id": op, "effect_ref": ref, "ts": raw.get("observedAt"), "_line": line,
            "_format": "ledger"}, None


def article_line(text: str, line: int) -> tuple[dict[str, Any] | None, str | None] | None:
    """`article_record` of a line in the article's format (`type: attempt|effect`), or None when the
    line is not in that format at all."""
    if '"type"' not in text or limit_error(text) is not None:  # beyond the limits: parse_line said why
        return None
    try:
        raw = from_json(text)
    except ValueError:
        return None
    if type(raw) is dict and "event" not in raw and raw.get("type") in ARTICLE_TYPES:
        return article_record(raw, line)
    return None

