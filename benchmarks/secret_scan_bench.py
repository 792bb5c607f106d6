"""Benchmark rule H019's line scan: the planted canaries searched in every encoded form, per line of a log.

    python benchmarks/secret_scan_bench.py [--lines 60 1000000] [--canaries 0 1 3]

The log is audit_bench's (``events`` format: clean, reconciled, dedup-retried and faulty operations). For each
size and number of canaries it times ``NoSecretInLog.line`` over every line (building the finder, i.e.
precomputing every form, is timed apart), and, as a baseline, the search H019 made before: each canary as
written, a substring test. With no canary, only the credential patterns' cheap pre-test runs (the offline
audit's case).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))

from audit_bench import generate  # noqa: E402

from harness.checker.rules import NoSecretInLog  # noqa: E402
from harness.checker.secrets import may_hold_secret, pattern_hits  # noqa: E402


def as_written(text: str, canaries: dict[str, str]) -> list[str]:
    """The search before: each canary as written, then the patterns."""
    hits = [name for name, value in canaries.items() if value in text]
    if may_hold_secret(text):
        hits += pattern_hits(text)
    return hits


def measure(lines: list[str], count: int) -> dict[str, float]:
    canaries = {f"DEST{i}": f"hsk_canary_{secrets.token_hex(12)}" for i in range(count)}
    found: list[object] = []
    start = time.perf_counter()
    rule = NoSecretInLog(SimpleNamespace(secrets=canaries, log_name="audit.log"), found.append)  # type: ignore[arg-type]
    built = time.perf_counter() - start
    start = time.perf_counter()
    for number, text in enumerate(lines, 1):
        rule.line(number, text, None)
    scan = time.perf_counter() - start
    start = time.perf_counter()
    for text in lines:
        as_written(text, canaries)
    baseline = time.perf_counter() - start
    assert not found, found  # the generated log holds no secret
    return {"build_ms": built * 1e3, "scan_s": scan, "per_line_us": scan / len(lines) * 1e6,
            "baseline_s": baseline, "ratio": scan / baseline if baseline else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[60, 1_000_000])
    parser.add_argument("--canaries", type=int, nargs="+", default=[0, 1, 3])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.lines:
            path = Path(scratch) / "audit.log"
            generate(path, size, faulty=1)
            lines = path.read_text(encoding="utf-8").splitlines()[:size]
            for count in args.canaries:
                m = measure(lines, count)
                print(f"{len(lines):>9} lines, {count} canaries: build {m['build_ms']:.2f} ms, "
                      f"scan {m['scan_s']:.3f} s ({m['per_line_us']:.2f} us/line); "
                      f"as written only: {m['baseline_s']:.3f} s (x{m['ratio']:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
