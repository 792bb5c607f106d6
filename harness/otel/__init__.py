"""OpenTelemetry as an audit source (docs/otel.md).

- ``reader``: OTLP JSON (the Collector's file exporter format: one ``ExportTraceServiceRequest`` a line, or
  one document) -> our audit events, so the checker judges spans with the same rules. Standard library only:
  judging a trace needs no OpenTelemetry package.
- ``exporter``: for Python agents, an SDK ``SpanExporter`` that appends OTLP JSON lines to a file
  (``HARNESS_TRACE_FILE``), and a dump of an ``InMemorySpanExporter``'s spans (the ``otel`` extra).
- ``verdict``: a ``Verdict`` exported as spans, in the same file format (the ``otel`` extra).
"""
