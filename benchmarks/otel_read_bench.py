"""How fast a large OpenTelemetry trace is read as events and audited offline.

    python benchmarks/otel_read_bench.py [--operations 20000] [--per-line 500]

Writes a trace of N healthy operations (an operation span, an HTTP client attempt whose answer was lost, a
lookup span that found the effect, a resolution event: 3 spans an operation) as OTLP JSON lines of
``--per-line`` spans each, then times, in the same run (the machine is noisy): ``orjson.loads`` of every line
(the floor: the JSON alone), ``read_trace`` (streamed, typed: spans -> events), the reading it replaced
(``careful_trace`` in tests/otel/test_reader_properties.py: the whole text, every span read the careful way,
the collector running), and ``audit FILE --format otlp`` (read, judge, report). Prints spans per second and
the ratios.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from harness.audit.otlp import audit_trace  # noqa: E402
from harness.otel.reader import read_trace  # noqa: E402
from tests.otel.documents import OP, URL, event, request, span  # noqa: E402
from tests.otel.test_reader_properties import careful_trace  # noqa: E402


def operation(n: int) -> list[dict[str, object]]:
    trace = f"{n:032x}"
    op, attempt, lookup = f"{3 * n + 1:016x}", f"{3 * n + 2:016x}", f"{3 * n + 3:016x}"
    t = n * 0.01
    ids = {**OP, "harness.operation.id": f"op_{n}", "harness.intent.id": f"intent-{n}",
           "harness.idempotency_key": f"key_{n}"}
    return [
        span(attempt, "POST", t + 0.001, t + 0.002, {"http.request.method": "POST", "url.full": URL,
                                                      "harness.idempotency_key": f"key_{n}",
                                                      "error.type": "ConnectionError"},
             parent=op, status=2, trace=trace),
        span(lookup, "lookup", t + 0.003, t + 0.004, {"harness.observation.source": "lookup",
                                                       "http.request.method": "GET", "url.full": URL,
                                                       "http.response.status_code": 200,
                                                       "harness.observation.found": True,
                                                       "harness.effect_refs": [f"tkt_{n}"]}, parent=op, trace=trace),
        span(op, "operation create_ticket", t, t + 0.006, ids, kind=1, trace=trace, events=[
            event("harness.resolution", t + 0.005, {"harness.state": "succeeded", "harness.effect_refs": [f"tkt_{n}"],
                                                    "harness.evidence": [lookup]})]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=20_000)
    parser.add_argument("--per-line", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.jsonl"
        spans = [s for n in range(args.operations) for s in operation(n)]
        with path.open("w", encoding="utf-8") as handle:
            for i in range(0, len(spans), args.per_line):
                handle.write(json.dumps(request(*spans[i:i + args.per_line])) + "\n")
        size = path.stat().st_size
        began = time.perf_counter()
        with path.open("rb") as handle:
            for line in handle:
                orjson.loads(line)
        parse = time.perf_counter() - began
        began = time.perf_counter()
        log = read_trace(path)
        read = time.perf_counter() - began
        began = time.perf_counter()
        before = careful_trace(path, str(path))
        careful = time.perf_counter() - began
        assert before == log, "the streamed reading differs from the careful one"
        began = time.perf_counter()
        summary = audit_trace(path, format="json", out=io.StringIO())
        audited = time.perf_counter() - began
    print(f"{size / 1e6:.1f} MB, {log.spans} spans, {log.events} events ({args.operations} operations)")
    print(f"orjson.loads of every line (the floor): {parse:.2f} s ({log.spans / parse:,.0f} spans/s)")
    print(f"read as events (streamed): {read:.2f} s ({log.spans / read:,.0f} spans/s, {size / 1e6 / read:.1f} MB/s): "
          f"{read / parse:.1f}x the floor")
    print(f"read as before (whole file, careful): {careful:.2f} s ({log.spans / careful:,.0f} spans/s): "
          f"the streamed reading {careful / read:.1f}x faster")
    print(f"audit --format otlp: {audited:.2f} s ({log.spans / audited:,.0f} spans/s), {summary.outcome}")


if __name__ == "__main__":
    main()
