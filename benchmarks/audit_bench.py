"""Benchmark the offline audit: generate a log of N audit events, audit it, report events/s and peak memory.

    python benchmarks/audit_bench.py [--events 1000000] [--format json|text] [--keep]

The log mixes the stories a production log holds: clean single attempts, lost responses resolved by a
lookup, dedup retries with the same key, rate-limited retries, and duplicated effects. The audit runs
in a child process so its peak RSS is its own (the generator's memory is not counted).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
from harness.audit import run_audit
path, fmt = sys.argv[1], sys.argv[2]
start = time.perf_counter()
with open(os.devnull, "w") as sink:
    status = run_audit(path, format=fmt, out=sink, err=sys.stderr)
elapsed = time.perf_counter() - start
print(json.dumps({"status": status, "seconds": elapsed,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


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
    parser.add_argument("--keep", action="store_true", help="keep the generated log and print its path")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    try:
        log = folder / "agent.ndjson"
        start = time.perf_counter()
        count = generate(log, args.events)
        generated = time.perf_counter() - start
        size_mb = log.stat().st_size / 1e6
        child = subprocess.run([sys.executable, "-c", CHILD, str(log), args.format], capture_output=True,
                               text=True, timeout=900)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        result = json.loads(child.stdout.strip().splitlines()[-1])
        rate = count / result["seconds"]
        print(f"events: {count:,} ({size_mb:.0f} MB, generated in {generated:.1f} s)")
        print(f"audit ({args.format}): {result['seconds']:.2f} s -> {rate:,.0f} events/s; "
              f"peak RSS {result['peak_rss_mb']:.0f} MB; exit status {result['status']}")
        print(f"goal: >= 300,000 events/s and < 500 MB -> "
              f"{'met' if rate >= 300_000 and result['peak_rss_mb'] < 500 else 'NOT met'}")
        if args.keep:
            print(f"log kept: {log}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
