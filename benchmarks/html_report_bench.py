"""Benchmark the HTML investigation report: generation time and size at N operations.

    python benchmarks/html_report_bench.py [--operations 1000 10000 100000] [--keep]

Each size is a synthetic audit log (benchmarks/audit_bench.py's mix: clean single attempts, lost responses
resolved by a lookup, dedup retries, blind retries with two effects) judged offline
(``check(load_log(path), offline=True)``, as ``python -m harness audit LOG --html`` does), then written by
``harness.html_report.write_html_report``. Reported per size: the time to judge (not the report's), the time to
write the report, the main file's size, the number of files and their total size. Above
``ONE_FILE_LIMIT`` operations the report is paged, so the main file stays the same size however large the run.

Also printed: the report's microseconds an operation (issue 34's goal: at most 100), its ratio to the judging of
the same log in the same run (the machine's noise is in both), and the bytes written an operation. The templates
are compiled once before the first size (a warm-up report of ten operations), so the first size does not carry it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit_bench import generate  # noqa: E402  (the audit benchmark's log mix)

from harness.audit import load_log  # noqa: E402
from harness.checker import check  # noqa: E402
from harness.html_report import RunInfo, write_html_report  # noqa: E402

EVENTS_PER_OPERATION = 4  # about: the mix's stories hold 3 to 5 events


def measure(operations: int, folder: Path) -> dict[str, float]:
    log = folder / f"log-{operations}.ndjson"
    if log.exists():  # the warm-up's size asked again
        log = folder / f"log-{operations}-again.ndjson"
    generate(log, operations * EVENTS_PER_OPERATION)
    t0 = time.perf_counter()
    evidence = load_log(log)
    verdict = check(evidence, offline=True)
    judged = time.perf_counter() - t0
    out = log.with_suffix("") / "report.html"
    out.parent.mkdir()
    t1 = time.perf_counter()
    written = write_html_report(out, verdict, evidence=evidence, run=RunInfo(title=f"benchmark {operations}"))
    seconds = time.perf_counter() - t1
    return {"operations": len(verdict.operations), "judge_s": judged, "report_s": seconds,
            "main_kb": out.stat().st_size / 1024, "files": len(written),
            "total_mb": sum(p.stat().st_size for p in written) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--keep", action="store_true", help="keep the generated logs and reports")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="html-bench-"))
    try:
        measure(10, folder)  # the warm-up: Jinja compiles the templates once a process
        print(f"{'operations':>10} {'judge s':>8} {'report s':>9} {'us/op':>6} {'/judge':>7} {'KB/op':>6} "
              f"{'main KB':>8} {'files':>6} {'total MB':>9}")
        for n in args.operations:
            m = measure(n, folder)
            ops = m["operations"]
            print(f"{ops:>10} {m['judge_s']:>8.2f} {m['report_s']:>9.2f} {m['report_s'] / ops * 1e6:>6.0f} "
                  f"{m['report_s'] / m['judge_s']:>6.2f}x {m['total_mb'] * 1000 / ops:>6.1f} {m['main_kb']:>8.0f} "
                  f"{m['files']:>6} {m['total_mb']:>9.1f}", flush=True)
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
