"""The SDK exporter and docs/otel.md's example: spans made by the real OpenTelemetry SDK, written as OTLP JSON
lines, read back by the harness's reader."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from harness.contract import TRACE_FILE_ENV
from harness.otel.exporter import dump_in_memory
from harness.otel.reader import read_trace

REPO = Path(__file__).resolve().parents[2]


def test_an_in_memory_exporters_spans_are_dumped_as_one_otlp_line(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("operation", attributes={"harness.operation.id": "op_1"}) as op:
        with tracer.start_as_current_span("POST", kind=SpanKind.CLIENT, attributes={"http.request.method": "POST",
                                                               "url.full": "http://h/tickets",
                                                               "http.response.status_code": 201}):
            pass
        op.add_event("harness.resolution", {"harness.state": "unknown"})
    provider.shutdown()
    target = tmp_path / "trace.jsonl"
    assert dump_in_memory(memory, target) == 2
    [line] = target.read_text().splitlines()
    span = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
    assert span["kind"] == 3 and isinstance(span["startTimeUnixNano"], str)  # integers for enums, int64 as strings
    events = [record["event"] for record, _, _ in read_trace(target).items if record]
    assert events == ["operation", "attempt", "resolution"]


class _Tickets(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(dict(self.headers))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"id": "tkt_0001"}'
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tickets() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Tickets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/tickets"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_documented_example_writes_a_trace_the_harness_reads(tmp_path: Path, tickets: str) -> None:
    text = (REPO / "docs" / "otel.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- otel-example:start -->\n```python\n(.*?)```\n<!-- otel-example:end -->", text, re.S)
    assert block, "docs/otel.md lost its example"
    (tmp_path / "example.py").write_text(block.group(1), encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, TRACE_FILE_ENV: str(trace), "TICKETS_URL": tickets}
    subprocess.run([sys.executable, str(tmp_path / "example.py")], env=env, check=True, timeout=60, cwd=REPO)
    operation, attempt, resolution = [record for record, _, _ in read_trace(trace).items if record]
    assert (operation["event"], operation["intent_id"]) == ("operation", "printer-on-fire")
    assert (attempt["dispatch_state"], attempt["http_status"]) == ("response_received", 201)
    assert attempt["path"] == "/tickets"
    assert attempt["idempotency_key"] == "key_op_1" and attempt["attempt_budget_remaining"] == 2
    [headers] = _Tickets.seen
    # the journal's correlation key: the span's trace and span id (the SDK's trace flags are not in OTLP)
    assert headers["traceparent"][:52] == attempt["traceparent"][:52]
    assert resolution["state"] == "unknown" and resolution["evidence"] == [attempt["attempt_id"]]
