"""Issue 19's figures in one run: checking at 1k/10k/100k operations, the offline audit against a bare parse
(both formats, 1,000,000 lines), and the same audit on Spark and on DuckDB, compared byte for byte.

    python benchmarks/scale_bench.py [--lines 1000000] [--spark-lines 100000] [--master local[2]]

It runs ``check_scale_bench.py`` and ``audit_bench.py`` (each prints its own figures and goals), then audits one
generated log (our format, 10% faulty operations) with ``--engine duckdb`` and ``--engine spark`` and says
whether their outputs (JSON) are equal (exit status 1 when not). The generated files are removed at the end.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def spark_equals_duckdb(lines: int, master: str) -> bool:
    import audit_bench

    from harness.audit import audit_file
    from harness.audit.spark_engine import SparkEngine

    with tempfile.TemporaryDirectory(prefix="scale-bench-") as folder:
        log = Path(folder) / "agent.ndjson"
        count = audit_bench.generate(log, lines, 10)
        outputs, times = {}, {}
        start = time.perf_counter()
        out = io.StringIO()
        audit_file(log, format="json", out=out, engine="duckdb")
        outputs["duckdb"], times["duckdb"] = out.getvalue(), time.perf_counter() - start
        start = time.perf_counter()
        with SparkEngine(master) as spark:
            started = time.perf_counter() - start
            out = io.StringIO()
            audit_file(log, format="json", out=out, engine=spark)
        outputs["spark"], times["spark"] = out.getvalue(), time.perf_counter() - start
        equal = outputs["spark"] == outputs["duckdb"]
        print(f"{count:,} lines: duckdb {times['duckdb']:.1f} s; spark ({master}) {times['spark']:.1f} s "
              f"(of which {started:.1f} s starting the session); outputs {len(outputs['duckdb']):,} bytes, "
              f"{'EQUAL' if equal else 'DIFFERENT'}")
        return equal


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--spark-lines", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    # each benchmark says its own goal met or not (exit status 1 when not); the figures are what this prints
    section("check time per operation (benchmarks/check_scale_bench.py --mode check)")
    subprocess.run([sys.executable, str(HERE / "check_scale_bench.py"), "--mode", "check"], check=False)
    section(f"offline audit vs json.loads, {args.lines:,} lines (benchmarks/audit_bench.py)")
    subprocess.run([sys.executable, str(HERE / "audit_bench.py"), "--lines", str(args.lines)], check=False)
    section(f"Spark and DuckDB, one log of {args.spark_lines:,} lines")
    return 0 if spark_equals_duckdb(args.spark_lines, args.master) else 1


if __name__ == "__main__":
    sys.exit(main())
