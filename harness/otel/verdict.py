"""A verdict as OpenTelemetry spans (``--otel-out FILE``), made with the SDK and written in the file format the
harness reads (OTLP JSON lines, ``harness.otel.exporter``), so a trace backend shows the judgement beside the
agent's own trace.

One trace per verdict: a root span ``harness.verdict`` (passed, mode, counts; status ERROR when it failed)
with one child span ``harness.operation`` per operation judged (or ``harness.intent`` per intent in black-box
mode) and each finding as a span event ``harness.finding`` (code, rule, message, operation) on the span of
what it is about, run-wide findings on the root. ``read_verdict_spans`` reads them back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Span, Status, StatusCode

from harness.otel.exporter import OtlpJsonLinesExporter
from harness.results.verdict import Finding, Verdict

if TYPE_CHECKING:
    from harness.results.scenario_result import ScenarioResult

VERDICT_SPAN, OPERATION_SPAN, INTENT_SPAN, FINDING_EVENT = ("harness.verdict", "harness.operation",
                                                             "harness.intent", "harness.finding")
SCOPE = "retry-harness.verdict"


def _finding(span: Span, finding: Finding) -> None:
    span.add_event(FINDING_EVENT, {k: v for k, v in (
        ("harness.finding.code", finding.code), ("harness.finding.rule", finding.rule),
        ("harness.finding.message", finding.message), ("harness.operation.id", finding.operation_id),
        ("harness.intent.id", finding.intent_id),
        ("harness.finding.evidence", json.dumps(finding.evidence, default=str))) if v is not None})


def export_verdict(verdict: Verdict, path: str | os.PathLike[str], *, scenario: str | None = None,
                   agent: str | None = None, evidence_dir: str | None = None) -> None:
    """Append ``verdict`` to ``path`` as spans (one OTLP JSON line per span, as they end)."""
    resource = Resource.create({"service.name": "retry-harness"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesExporter(path)))
    tracer = provider.get_tracer(SCOPE)
    attributes: dict[str, Any] = {k: v for k, v in (
        ("harness.verdict.passed", verdict.passed), ("harness.verdict.mode", verdict.mode),
        ("harness.verdict.findings", len(verdict.findings)), ("harness.verdict.codes", sorted(verdict.codes)),
        ("harness.verdict.operations", len(verdict.operations) or len(verdict.intents)),
        ("harness.scenario", scenario), ("harness.agent", agent), ("harness.evidence_dir", evidence_dir),
        ("harness.verdict.not_judged", list(verdict.not_judged))) if v is not None}
    try:
        with tracer.start_as_current_span(VERDICT_SPAN, attributes=attributes) as root:
            for op in verdict.operations:
                with tracer.start_as_current_span(OPERATION_SPAN, attributes={k: v for k, v in (
                        ("harness.operation.id", op.operation_id), ("harness.intent.id", op.intent_id),
                        ("harness.classification", op.classification), ("harness.state", op.state),
                        ("harness.effect_refs", list(op.effects)),
                        ("harness.attempts", [a.attempt_id for a in op.attempts])) if v is not None}) as span:
                    for finding in op.findings:
                        _finding(span, finding)
                    if op.findings:
                        span.set_status(Status(StatusCode.ERROR, " ".join(sorted({f.code for f in op.findings}))))
            for intent in verdict.intents:
                with tracer.start_as_current_span(INTENT_SPAN, attributes={
                        "harness.intent.id": intent.intent_id, "harness.classification": intent.classification,
                        "harness.effect_refs": list(intent.effects)}) as span:
                    for finding in intent.findings:
                        _finding(span, finding)
                    if intent.findings:
                        span.set_status(Status(StatusCode.ERROR, " ".join(sorted({f.code for f in intent.findings}))))
            judged = {op.operation_id for op in verdict.operations} | {i.intent_id for i in verdict.intents}
            for finding in verdict.findings:
                if finding.operation_id not in judged and finding.intent_id not in judged:
                    _finding(root, finding)
            if not verdict.passed:
                root.set_status(Status(StatusCode.ERROR, " ".join(sorted(verdict.codes))))
    finally:
        provider.shutdown()


def export_result(result: ScenarioResult, path: str | os.PathLike[str]) -> None:
    """A scenario run's verdict as spans (``export_verdict``), named by its scenario, agent and evidence folder:
    ``run --otel-out`` and the plugin's ``--harness-otel-out`` alike. A run whose evidence is incomplete has no
    verdict to export."""
    if result.incomplete:
        return
    export_verdict(result.verdict, path, scenario=result.scenario, agent=result.agent,
                   evidence_dir=str(result.evidence_dir))


def read_verdict_spans(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The verdict spans of a file (``export_verdict``'s): name, attributes, findings (each event's attributes),
    status code, in the order they were written. Through the harness's own reader."""
    from harness.otel.reader import read_spans

    spans, problems = read_spans(Path(path))
    if problems:
        raise ValueError(problems[0][1])
    return [{"name": s.name, "span_id": s.span_id, "parent_span_id": s.parent_id, "attributes": s.attributes,
             "status_code": s.status_code, "status_message": s.status_message,
             "findings": [e.attributes for e in s.events if e.name == FINDING_EVENT]}
            for s in spans if s.name in (VERDICT_SPAN, OPERATION_SPAN, INTENT_SPAN)]
