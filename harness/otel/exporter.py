"""Spans to an OTLP JSON lines file, for Python agents (and the verdict, ``harness.otel.verdict``).

The encoding is OpenTelemetry's own: ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans`` makes the
``ExportTraceServiceRequest`` an OTLP exporter would send, and protobuf's ``json_format`` writes it as JSON. One
line per export call, flushed, as the Collector's file exporter writes; ids as hex (the OTLP JSON encoding,
where protobuf's own JSON mapping would give base64) so the Collector's otlpjsonfile receiver reads it too.

    from harness.otel.exporter import tracer_provider
    provider = tracer_provider()            # HARNESS_TRACE_FILE, a SimpleSpanProcessor: each span on its end
    tracer = provider.get_tracer("my-agent")
    ...
    provider.shutdown()
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]  # stubs only where temporalio pulled them in
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.contract import TRACE_FILE_ENV

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as one OTLP JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``)."""
    document = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return document


def _hex_ids(item: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if item.get(key):
            item[key] = base64.b64decode(item[key]).hex()


class OtlpJsonLinesExporter(SpanExporter):
    """Appends each batch of spans to ``path`` as one OTLP JSON line (several processes may share the file:
    each line is one write of an append-mode file, flushed)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(otlp_json(spans), separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until shutdown
            self._file.write(line)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def dump_in_memory(exporter: InMemorySpanExporter, path: str | os.PathLike[str]) -> int:
    """The finished spans an ``InMemorySpanExporter`` holds, appended to ``path`` as one OTLP JSON line (what
    the harness reads); returns how many. For an agent (or a test) that keeps its spans in memory."""
    spans = exporter.get_finished_spans()
    OtlpJsonLinesExporter(path).export(spans)
    return len(spans)


def tracer_provider(path: str | os.PathLike[str] | None = None, *, service_name: str = "agent",
                    attributes: dict[str, Any] | None = None) -> TracerProvider:
    """A ``TracerProvider`` exporting every span as it ends to ``path`` (default: ``HARNESS_TRACE_FILE``), with
    ``service.instance.id`` fresh for this process: the harness reads it as the event's session."""
    target = path or os.environ.get(TRACE_FILE_ENV)
    if not target:
        raise RuntimeError(f"no trace file: give a path or set {TRACE_FILE_ENV} (the harness sets it for an agent)")
    resource = Resource.create({"service.name": service_name, "service.instance.id": f"ses_{uuid.uuid4().hex[:12]}",
                                **(attributes or {})})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesExporter(target)))
    return provider
