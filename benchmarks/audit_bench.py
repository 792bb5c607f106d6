"""Benchmark the offline audit: generate a log of N audit events, audit it, report events/s and peak memory.

    python benchmarks/audit_bench.py [--events 1000000] [--format json|text] [--workers N] [--keep]

The log mixes the stories a production log holds: clean single attempts, lost responses resolved by a
lookup, dedup retries with the same key, and blind retries with two effects. The audit runs in a child
process so its peak RSS is its own (the generator's memory is not counted); its worker processes'
peak is reported beside it. So that a figure from a busy or slow machine still means something, the
same run measures a baseline on the same file, ``json.loads`` of every line in one process, and reports
the audit's speed as a multiple of it. The generated log is removed at the end, also on an error, a
timeout or SIGTERM (unless --keep).
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
import time
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
from harness.cli import run_audit
path, fmt, workers = sys.argv[1], sys.argv[2], (int(sys.argv[3]) if sys.argv[3] != "auto" else None)
start = time.perf_counter()
with open(os.devnull, "w") as sink:
    status = run_audit(path, format=fmt, out=sink, err=sys.stderr, workers=workers)
elapsed = time.perf_counter() - start
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"status": status, "seconds": elapsed, "peak_rss_mb": me.ru_maxrss / 1024,
                  "worker_peak_rss_mb": kids.ru_maxrss / 1024,
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


def run_child(code: str, args: list[str], timeout: float, scratch: Path) -> dict:
    """Run a measuring child in its own process group; on a timeout (or a signal) the whole group
    (audit workers too) is killed. Its temporary files go under ``scratch``, removed with the log."""
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
    raise SystemExit(f"stopped by signal {signum}")  # so the finally below removes the log"""


def generate(path: Path, events: int) -> int:
    """Write about ``events`` events; returns the exact count."""
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
            story = n % 10
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--format", choices=("json", "text"), default="json")
    parser.add_argument("--workers", default="auto",
                        help="audit processes: auto (run_audit's default: one per core for a large file) or N")
    parser.add_argument("--keep", action="store_true", help="keep the generated log and print its path")
    args = parser.parse_args(argv)
    if args.workers != "auto" and not (args.workers.isdigit() and int(args.workers) >= 1):
        parser.error(f"--workers {args.workers!r}: give auto or a whole number of at least 1")
    previous = signal.signal(signal.SIGTERM, _terminated)
    folder = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    try:
        log = folder / "agent.ndjson"
        start = time.perf_counter()
        count = generate(log, args.events)
        generated = time.perf_counter() - start
        size_mb = log.stat().st_size / 1e6
        baseline = run_child(BASELINE, [str(log)], timeout=900, scratch=folder)
        try:
            result = run_child(CHILD, [str(log), args.format, args.workers], timeout=900, scratch=folder)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        rate = count / result["seconds"]
        base_rate = count / baseline["seconds"]
        print(f"events: {count:,} ({size_mb:.0f} MB, generated in {generated:.1f} s)")
        print(f"baseline (json.loads of every line, 1 process): {baseline['seconds']:.2f} s "
              f"-> {base_rate:,.0f} lines/s")
        print(f"audit ({args.format}, workers {args.workers}): {result['seconds']:.2f} s -> {rate:,.0f} events/s "
              f"= {rate / base_rate:.2f}x the baseline; {result['cpu_seconds']:.1f} CPU s "
              f"({count / result['cpu_seconds']:,.0f} events per CPU second); exit status {result['status']}")
        peak = result["peak_rss_mb"] + result["worker_peak_rss_mb"] * _workers_used(args.workers, log)
        print(f"peak RSS: audit process {result['peak_rss_mb']:.0f} MB, largest worker "
              f"{result['worker_peak_rss_mb']:.0f} MB; at most {peak:.0f} MB together")
        print(f"goal: >= 300,000 events/s and < 500 MB -> "
              f"{'met' if rate >= 300_000 and peak < 500 else 'NOT met'}")
        if args.keep:
            print(f"log kept: {log}")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def _workers_used(workers: str, log: Path) -> int:
    """How many worker processes the audit forked (0 when it ran alone)."""
    if workers != "auto":
        return int(workers) if int(workers) > 1 else 0
    from harness.audit.shards import SHARD_MIN_BYTES, _cores

    if log.stat().st_size < SHARD_MIN_BYTES:
        return 0
    n = min(4, _cores())
    return n if n > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
