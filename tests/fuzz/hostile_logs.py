"""Hostile audit logs from a seed: a chained log of every event kind with one line made hostile.

The kinds: nesting past the limit at any field, huge integers, lone surrogates, NUL, invalid UTF-8, a
line cut short, and every field of every event kind given a value of each JSON type. Used by
tests/fuzz/test_log_fuzz.py (a few hundred per run) and benchmarks/fuzz_logs.py (thousands).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from harness.chain import link

SEED = 20261201
KINDS = ("deep", "huge_int", "surrogate", "nul", "bad_utf8", "truncate", "type")
CONFUSIONS: list[Any] = [None, True, False, 0, -1, 2**64, 1.5, 1e308, "", "x", [], ["a", 1], {}, {"a": None}]


def clean_events() -> list[dict[str, Any]]:
    """One story with every event kind, chained."""
    base = {"ts": 1.0, "session_id": "ses_1", "operation_id": "op_1"}
    events = [
        {"event": "operation", **base, "intent_id": "int_1", "idempotency_key": "k1",
         "intent": {"kind": "create_ticket", "destination": "tickets", "params": {"title": "t"}}},
        {"event": "attempt", **base, "attempt_id": "att_1", "dispatch_state": "sent_no_response",
         "idempotency_key": "k1", "attempt_budget_remaining": 1, "method": "POST", "http_status": None},
        {"event": "observation", **base, "observation_id": "obs_1", "source": "lookup", "found": True,
         "effect_refs": ["tkt_1"]},
        {"event": "approval", **base, "approval_id": "apr_1", "decision": "approved", "scope": "close"},
        {"event": "resolution", **base, "state": "succeeded", "effect_refs": ["tkt_1"],
         "evidence": ["att_1", "obs_1"]},
    ]
    prev = "sha256:" + "0" * 64
    for seq, event in enumerate(events, start=1):
        link(event, seq, prev)
        prev = event["hash"]
    return events


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"))


def _deep(rng: random.Random) -> str:
    depth = rng.choice([65, 100, 999, 1001, 1100, 5000])
    opener = rng.choice(["[", '{"a":'])
    closer = "]" if opener == "[" else "}"
    return opener * depth + "1" + closer * depth


def hostile_case(rng: random.Random) -> tuple[str, bytes, int]:
    """(kind, the file's bytes, the 1-based number of the hostile line)."""
    events = clean_events()
    index = rng.randrange(len(events))
    record = events[index]
    field = rng.choice(sorted(record))
    kind = rng.choice(KINDS)
    lines = [_line(e).encode() for e in events]
    text = _line(record)
    if kind == "deep":
        value = _line({field: record[field]})[1:-1]  # '"field":value' as _line wrote it
        hostile = text.replace(value, f'"{field}":' + _deep(rng), 1)
    elif kind == "huge_int":
        hostile = text[:-1] + f',"{rng.choice(["x", field])}":' + rng.choice(["9", "-1"]) + "0" * rng.choice(
            [400, 401, 4300, 5000, 20000]) + "}"
    elif kind == "surrogate":
        escape = rng.choice(["\\ud800", "\\udfff", "\\udc00x", "\\ud83d"])
        hostile = text[:-1] + f',"{field if rng.random() < 0.5 else "s"}":"{escape}"' + "}"
    elif kind == "nul":
        where = rng.randrange(len(text))
        hostile = text[:where] + rng.choice(["\x00", "\\u0000"]) + text[where:]
    elif kind == "truncate":
        hostile = text[: rng.randrange(1, len(text))]
    elif kind == "type":
        confused = dict(record)
        confused[field] = rng.choice(CONFUSIONS)
        hostile = _line(confused)
    else:
        hostile = text
    raw = hostile.encode("utf-8", "surrogatepass")
    if kind == "bad_utf8":
        where = rng.randrange(len(raw))
        raw = raw[:where] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + raw[where:]
    lines[index] = raw
    if kind == "truncate" and rng.random() < 0.5:  # the file itself cut there
        lines = lines[: index + 1]
        return kind, b"\n".join(lines), index + 1
    return kind, b"\n".join(lines) + b"\n", index + 1


def cases(count: int, seed: int = SEED) -> Iterator[tuple[str, bytes, int]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield hostile_case(rng)
