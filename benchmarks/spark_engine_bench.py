"""How long the audit's Spark engine (harness/audit/spark_engine.py) takes on one large log, local[2].

    python benchmarks/spark_engine_bench.py [--events 1000000] [--file /tmp/spark1m.ndjson] [--master local[2]]

Writes the log with audit_bench.generate unless the file exists, then times: the session's start,
``load`` (the view ``lines``: a pass that counts each split's lines), ``features`` with a count over it
(the lines numbered, DuckDB's FEATURES_SQL over each Arrow batch in the Python workers, cached), a second
query over the cached features, one line in a hundred streamed to the driver in line order, and ``close``.
The same features by DuckDB alone, in this process, for comparison. Timings go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import audit_bench  # noqa: E402

from harness.audit import triage  # noqa: E402
from harness.audit.spark_engine import SparkEngine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--file", type=Path, default=Path("/tmp/spark1m.ndjson"))
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    if not args.file.exists():
        audit_bench.generate(args.file, args.events)
    clock = time.perf_counter
    times: dict[str, float] = {}
    started = clock()
    with SparkEngine(args.master) as engine:
        times["start"] = clock() - started
        mark = clock()
        loaded = engine.load([str(args.file)])
        times["load"] = clock() - mark
        mark = clock()
        engine.features()
        count = list(engine.query("SELECT count(*) FROM features"))
        times["features + count"] = clock() - mark
        mark = clock()
        list(engine.query("SELECT count(*) FROM features WHERE line % 2 = 0"))
        times["cached query"] = clock() - mark
        mark = clock()
        streamed = sum(1 for _ in engine.query("SELECT line, text FROM features WHERE line % 100 = 0 ORDER BY line"))
        times["1% of lines to the driver, ordered"] = clock() - mark
        mark = clock()
    times["close"] = clock() - mark

    import duckdb

    mark = clock()
    with duckdb.connect() as con:
        quoted = "'" + str(args.file).replace("'", "''") + "'"
        con.execute("CREATE VIEW lines AS SELECT row_number() OVER () AS line, column0 AS text "
                    f"FROM read_csv({quoted}, "
                    "columns={'column0': 'VARCHAR'}, delim='', quote='', escape='', header=false, auto_detect=false)")
        duck = con.sql(f"SELECT count(*) FROM ({triage.FEATURES_SQL})").fetchall()
    times["duckdb alone: lines + features + count"] = clock() - mark
    print(f"{loaded} features {count} duckdb {duck} streamed {streamed} rows", file=sys.stderr)
    for what, seconds in times.items():
        print(f"{what}: {seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
