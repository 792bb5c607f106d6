"""The audit split across worker processes gives byte for byte what one process gives, on every input."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path

import pytest

import harness.audit.shards
from harness.audit.shards import _audit_sharded
from harness.cli import run_audit

_real_worker = harness.audit.shards._shard_worker

ARTICLE = Path(__file__).parent / "fixtures" / "article_four_operations.ndjson"
ERRORS = Path(__file__).parent / "errors"


@pytest.fixture(autouse=True)
def shard_folders(tmp_path, monkeypatch):
    """Every test here runs with its own temporary folder, which must be left empty: the workers' files
    are removed whether the workers finished, bailed out or failed."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert list(folder.iterdir()) == []


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


def outputs(path: Path, workers: int, window: int) -> list[tuple[int, str, str]]:
    results = []
    for fmt in ("json", "text"):
        out, err = io.StringIO(), io.StringIO()
        results.append((run_audit(path, format=fmt, out=out, err=err, window=window, workers=workers),
                        out.getvalue(), err.getvalue()))
    return results


def assert_same_as_one_process(path: Path, window: int) -> None:
    alone = outputs(path, 1, window)
    for workers in (2, 3):
        assert outputs(path, workers, window) == alone, (path, workers)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("window", [2, 10_000])
def test_random_logs_audit_the_same_split_or_not(tmp_path, seed, window):
    log = write_log(tmp_path / "agent.ndjson", seed)
    assert_same_as_one_process(log, window)
    if window == 10_000:
        assert _audit_sharded(log, str(log), "json", window, 2) is not None  # the workers did the work


NESTED = json.dumps({"event": "operation", "ts": 1, "session_id": "s", "intent": {"operation_id": "op_5"},
                     "operation_id": "op_nested", "intent_id": "int_nested"}, separators=(",", ":"))
ESCAPED = json.dumps({"event": "operation", "ts": 1, "session_id": "s", "operation_id": 'op_"q"'},
                     separators=(",", ":"))


@pytest.mark.parametrize("extra, bails", [
    (json.dumps({"event": "observation", "ts": 9e9, "session_id": "s", "operation_id": "op_1",
                 "observation_id": "late", "found": True}), True),  # perhaps after op_1 was judged
    (json.dumps({"event": "operation", "ts": 1, "session_id": "s", "operation_id": "op_new", "intent_id": "int_2",
                 "supersedes_operation_id": "op_2"}), True),
    (json.dumps({"event": "operation", "ts": 1, "session_id": "s", "operation_id": "op_kid",
                 "parent_operation_id": "op_3"}), True),
    (json.dumps({"event": "operation", "ts": 1, "session_id": "s", "operation_id": "op_twin", "intent_id": "int_4"}),
     None),  # H001 across operations: bails only when the twins land on different workers
    (json.dumps({"event": "attempt", "ts": 1, "session_id": "s", "operation_id": "op_thief", "attempt_id": "x",
                 "dispatch_state": "not_sent", "idempotency_key": "idem-op_6"}), None),  # H022 likewise
    (NESTED, None),  # an operation_id nested before the real one: read wrong from the text, caught on parsing
    (ESCAPED, False),
    (json.dumps({"event": "operation", "ts": 1, "session_id": "s", "operation_id": ""}), True),
    (json.dumps({"event": "approval", "ts": 1, "session_id": "s", "operation_id": "op_7", "approval_id": "apr_s",
                 "decision": "approved", "scope": "session", "approved_at": 1, "revoked_at": 2}), True),  # H037
])
def test_what_one_worker_cannot_judge_is_judged_by_one_process(tmp_path, extra, bails):
    log = write_log(tmp_path / "agent.ndjson", 99, count=20)
    log.write_text(log.read_text() + extra + "\n")
    assert_same_as_one_process(log, 10_000)
    assert_same_as_one_process(log, 2)
    if bails is not None:
        assert (_audit_sharded(log, str(log), "json", 10_000, 2) is None) == bails


def test_fixtures_and_error_examples_audit_the_same(tmp_path):
    for path in [ARTICLE, *sorted(ERRORS.glob("*.ndjson"))]:
        assert_same_as_one_process(path, 10_000)
    mixed = tmp_path / "mixed.ndjson"
    mixed.write_text(ARTICLE.read_text() + write_log(tmp_path / "ours.ndjson", 5, count=10).read_text())
    assert_same_as_one_process(mixed, 10_000)


def _dying_worker(*args, **kwargs):
    os._exit(3)  # what the kernel's OOM killer leaves: no exception, no result


def _appending_worker(path, *args, **kwargs):
    with open(path, "a") as log:  # the agent still writing while the audit runs
        log.write("\n")
    return _real_worker(path, *args, **kwargs)


@pytest.mark.parametrize("worker", [_dying_worker, _appending_worker])
def test_a_dead_worker_or_a_growing_log_means_one_process_audits(tmp_path, monkeypatch, worker):
    log = write_log(tmp_path / "agent.ndjson", 3)
    alone = outputs(log, 1, 10_000)
    monkeypatch.setattr(harness.audit.shards, "_shard_worker", worker)  # the forked workers see the patch
    assert _audit_sharded(log, str(log), "json", 10_000, 2) is None
    log.write_text(log.read_text().rstrip("\n") + "\n")
    assert outputs(log, 2, 10_000) == alone
