"""Audit logs the audit tests share, written with the real recorder."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.recorder import Recorder


def late_observation_log(path: Path, operations: int, *, chain: bool = False) -> Path:
    """``operations`` clean ticket operations, then a late observation for the first one: the line a
    streaming window may already have judged its operation without."""
    with Recorder(path, session_id="ses_1", chain=chain) as rec:
        for n in range(operations):
            rec.operation(f"op_{n}", intent_id=f"int_{n}")
            rec.attempt(f"op_{n}", f"att_{n}", "response_received", effect_refs=[f"tkt_{n}"])
            rec.resolution(f"op_{n}", "succeeded", effect_refs=[f"tkt_{n}"], evidence=[f"att_{n}"])
        rec.observation("op_0", "obs_late", source="callback", found=True, effect_refs=["tkt_0"])
    return path


def story(n: int, kind: str, base_ts: float) -> list[dict]:
    """One operation's lines: the shapes of a production log, good and bad."""
    op, key, fp = f"op_{n}", f"idem-op_{n}", f"sha256:{n:x}"
    base = {"session_id": "s", "operation_id": op}
    declared = dict(base, event="operation", ts=base_ts, intent_id=f"int_{n}", idempotency_key=key,
                    intent={"kind": "create_ticket", "destination": "tickets", "params": {"n": n}})
    attempt = dict(base, event="attempt", ts=base_ts + 1, attempt_id=f"a{n}", destination="tickets", method="POST",
                   path="/t", idempotency_key=key, request_fingerprint=fp, attempt_budget_remaining=1)
    done = dict(attempt, dispatch_state="response_received", http_status=201, effect_refs=[f"t{n}"])
    lost = dict(attempt, dispatch_state="sent_no_response")
    resolved = dict(base, event="resolution", ts=base_ts + 3, state="succeeded", effect_refs=[f"t{n}"],
                    evidence=[f"a{n}"])
    retry = dict(done, attempt_id=f"b{n}", retry_of_attempt_id=f"a{n}", retry_reason="response_lost_after_dispatch",
                 attempt_budget_remaining=0)
    if kind == "clean":
        return [declared, done, resolved]
    if kind == "retry":
        return [declared, lost, retry, dict(resolved, evidence=[f"b{n}"])]
    if kind == "blind":
        return [declared, lost, dict(retry, idempotency_key=f"idem-b{n}", effect_refs=[f"u{n}"]),
                dict(resolved, state="failed")]
    if kind == "open":
        return [declared, lost]
    if kind == "undeclared":
        return [done, resolved]
    if kind == "secret":
        return [declared, dict(done, note="Authorization: Bearer abcdefghijklmnop"), resolved]
    raise ValueError(kind)


KINDS = ["clean", "clean", "retry", "blind", "open", "undeclared", "secret"]


def write_log(path: Path, seed: int, count: int = 60, extras: tuple[str, ...] = ()) -> Path:
    """``count`` operations of random stories, interleaved, with malformed and blank lines now and then, and
    ``extras`` lines put in at random places."""
    rng = random.Random(seed)
    stories = [story(n, rng.choice(KINDS), 1000.0 + n) for n in range(count)]
    lines: list[str] = []
    while any(stories):  # interleave the operations, each in its own order
        current = rng.choice([s for s in stories if s])
        lines.append(json.dumps(current.pop(0), separators=(",", ":") if rng.random() < 0.8 else (", ", ": ")))
        if rng.random() < 0.03:
            lines.append(rng.choice(["{oops", "", "[1]", '{"event": "attempt", "operation_id": "op_3"}', "   "]))
    for extra in extras:
        at = rng.randrange(len(lines))
        lines.insert(at, extra)
    path.write_text("\n".join(lines) + "\n")
    return path
