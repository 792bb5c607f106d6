"""Benchmark the offline audit against a bare parse of the same file: both log formats, 1,000,000 lines.

    python benchmarks/audit_bench.py [--lines 1000000] [--formats events article] [--faulty 1 10]
                                     [--engines typed duckdb stream] [--keep]

Each log mixes the stories a production log holds. Ours (``events``): clean single attempts, lost responses
reconciled by a lookup, dedup retries under one key, and ``--faulty`` operations in a hundred blind retries
with a fresh key and two effects (every rule they break is reported). The second article's effect ledger
(``article``): clean attempts with their effect, timeouts retried under the same key and payload, and
``--faulty`` in a hundred retried without a key, with two effects.

The audit runs in a child process so its peak RSS is its own (the generator's memory is not counted; DuckDB's
threads are in the same process). So that a figure from a busy or slow machine still means something, the same
run measures a baseline on the same file, ``json.loads`` of every line in one process, and reports the audit's
time as a ratio to it (goal: at most 1.0, and a peak under 500 MB). The generated logs are removed at the end,
also on an error, a timeout or SIGTERM (unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
from harness.cli import run_audit
path, engine = sys.argv[1], sys.argv[2]
start = time.perf_counter()
with open(os.devnull, "w") as sink:
    status = run_audit(path, format="json", out=sink, err=sys.stderr, engine=engine)
elapsed = time.perf_counter() - start
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"status": status, "seconds": elapsed, "peak_rss_mb": me.ru_maxrss / 1024,
                  "cpu_seconds": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime}))
"""

# The baseline: decode every line with the standard library's json, nothing else, in one process.
BASELINE = r"""
import json, sys, time
start = time.perf_counter()
with open(sys.argv[1], encoding="utf-8", errors="replace") as handle:
    for line in handle:
        if line.strip():
            json.loads(line)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""
GOAL_RATIO, GOAL_MB = 1.0, 500


def run_child(code: str, args: list[str], timeout: float, scratch: Path) -> dict:
    """Run a measuring child in its own process group; on a timeout (or a signal) the whole group is killed.
    Its temporary files go under ``scratch``, removed with the log."""
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise
    if child.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({child.returncode}): {stderr.strip()[-2000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so the finally below removes the logs


def generate(path: Path, events: int, faulty: int = 10) -> int:
    """Write about ``events`` events of our format; ``faulty`` operations in a hundred are blind retries with
    two effects, the rest clean stories. Returns the exact count."""
    written = 0
    n = 0
    ts = 1_700_000_000.0
    dumps = json.dumps
    with path.open("w", encoding="utf-8") as out:
        while written < events:
            op = f"op_{n:08d}"
            key = f"idem-{op}"
            fp = f"sha256:{n:064x}"
            base = {"session_id": "ses_bench", "operation_id": op}
            story = 9 if n % 100 < faulty else (n % 100 - faulty) * 9 // (100 - faulty)
            lines = [dict(base, event="operation", ts=ts, intent_id=f"int_{n}", idempotency_key=key,
                          payload_fingerprint=fp, state="open",
                          intent={"kind": "create_ticket", "destination": "tickets", "params": {"n": n}})]
            first = dict(base, event="attempt", ts=ts + 0.1, attempt_id=f"att_{n}_1", attempt_number=1,
                         destination="tickets", method="POST", path="/tickets", idempotency_key=key,
                         request_fingerprint=fp, attempt_budget_remaining=2)
            if story < 5:  # clean
                lines.append(dict(first, dispatch_state="response_received", http_status=201, effect_refs=[f"t{n}"]))
                evidence = [f"att_{n}_1"]
            elif story < 7:  # lost response, reconciled by a lookup
                lines.append(dict(first, dispatch_state="sent_no_response", error="ReadTimeout"))
                lines.append(dict(base, event="observation", ts=ts + 1, observation_id=f"obs_{n}", source="lookup",
                                  method="GET", path="/tickets", found=True, effect_refs=[f"t{n}"]))
                evidence = [f"att_{n}_1", f"obs_{n}"]
            elif story < 9:  # lost response, documented dedup retry with the same key
                lines.append(dict(first, dispatch_state="sent_no_response", error="ReadTimeout"))
                lines.append(dict(first, ts=ts + 2, attempt_id=f"att_{n}_2", attempt_number=2,
                                  dispatch_state="response_received", http_status=201, effect_refs=[f"t{n}"],
                                  retry_of_attempt_id=f"att_{n}_1", retry_reason="response_lost_after_dispatch",
                                  retry_decision="retry", attempt_budget_remaining=1, prior_request_fingerprint=fp))
                evidence = [f"att_{n}_2"]
            else:  # a blind retry with a fresh key: two effects
                lines.append(dict(first, dispatch_state="sent_no_response", error="ReadTimeout"))
                lines.append(dict(first, ts=ts + 2, attempt_id=f"att_{n}_2", attempt_number=2,
                                  idempotency_key=f"idem-att_{n}_2", dispatch_state="response_received",
                                  http_status=201, effect_refs=[f"t{n}b"], retry_of_attempt_id=f"att_{n}_1",
                                  retry_reason="destination_5xx", attempt_budget_remaining=1))
                lines.append(dict(base, event="observation", ts=ts + 3, observation_id=f"obs_{n}", source="lookup",
                                  found=True, effect_refs=[f"t{n}", f"t{n}b"]))
                evidence = [f"att_{n}_2", f"obs_{n}"]
            lines.append(dict(base, event="resolution", ts=ts + 4, state="succeeded",
                              effect_refs=[f"t{n}b" if story == 9 else f"t{n}"], evidence=evidence))
            for record in lines:
                out.write(dumps(record, separators=(",", ":")) + "\n")
            written += len(lines)
            n += 1
            ts += 0.5
    return written


def generate_article(path: Path, lines: int, faulty: int = 10) -> int:
    """Write about ``lines`` lines of the second article's effect ledger (``type``: attempt | effect); ``faulty``
    operations in a hundred retried without a key after a timeout, with two effects. Returns the exact count."""
    written = n = 0
    dumps = json.dumps
    with path.open("w", encoding="utf-8") as out:
        while written < lines:
            op, ts = f"op_{n:08d}", f"2026-03-02T10:{(n // 60) % 60:02d}:{n % 60:02d}Z"
            key, payload = f"idem-{op}", f"sha256:{n:064x}"
            attempt = {"type": "attempt", "operationId": op, "attemptId": f"att_{n}_1", "idempotencyKey": key,
                       "payloadHash": payload, "result": "success", "observedAt": ts}
            effect = {"type": "effect", "operationId": op, "effectRef": f"t{n}", "observedAt": ts}
            if n % 100 < faulty:  # no key, a timeout, a blind retry: two effects
                first = dict(attempt, idempotencyKey=None, result="timeout")
                records = [first, dict(first, attemptId=f"att_{n}_2", result="success"), effect,
                           dict(effect, effectRef=f"t{n}b")]
            elif n % 3 == 0:  # a timeout retried under the same key and payload: one effect
                records = [dict(attempt, result="timeout"), dict(attempt, attemptId=f"att_{n}_2"), effect]
            else:
                records = [attempt, effect]
            for record in records:
                out.write(dumps(record, separators=(",", ":")) + "\n")
            written += len(records)
            n += 1
    return written


GENERATORS = {"events": generate, "article": generate_article}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--formats", nargs="+", choices=sorted(GENERATORS), default=["events", "article"])
    parser.add_argument("--faulty", type=int, nargs="+", default=[1, 10],
                        help="faulty operations in a hundred, one log per figure (default: 1 and 10)")
    parser.add_argument("--engines", nargs="+", choices=("typed", "duckdb", "stream"), default=["typed"])
    parser.add_argument("--keep", action="store_true", help="keep the generated logs and print their paths")
    args = parser.parse_args(argv)
    if any(not 0 <= f <= 100 for f in args.faulty):
        parser.error(f"--faulty {args.faulty}: each a whole number from 0 to 100")
    previous = signal.signal(signal.SIGTERM, _terminated)
    folder = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    met = True
    try:
        for fmt in args.formats:
            for faulty in args.faulty:
                log = folder / f"{fmt}-{faulty}.ndjson"
                count = GENERATORS[fmt](log, args.lines, faulty)
                baseline = run_child(BASELINE, [str(log)], timeout=900, scratch=folder)
                print(f"{fmt} format, {count:,} lines ({log.stat().st_size / 1e6:.0f} MB), {faulty}% faulty "
                      f"operations: json.loads of every line {baseline['seconds']:.2f} s")
                for engine in args.engines:
                    try:
                        result = run_child(CHILD, [str(log), engine], timeout=900, scratch=folder)
                    except RuntimeError as exc:
                        print(exc, file=sys.stderr)
                        return 1
                    ratio = result["seconds"] / baseline["seconds"]
                    ok = ratio <= GOAL_RATIO and result["peak_rss_mb"] < GOAL_MB
                    met = met and ok
                    print(f"  audit --engine {engine}: {result['seconds']:.2f} s = {ratio:.2f}x the parse's time, "
                          f"{result['cpu_seconds']:.1f} CPU s, peak RSS {result['peak_rss_mb']:.0f} MB, exit status "
                          f"{result['status']} -> goal (<= {GOAL_RATIO}x, < {GOAL_MB} MB) "
                          f"{'met' if ok else 'NOT met'}")
                if args.keep:
                    print(f"  log kept: {log}")
                else:
                    log.unlink()
        print(f"goal: every audit at most {GOAL_RATIO}x the parse and under {GOAL_MB} MB -> "
              f"{'met' if met else 'NOT met'}")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
