"""Trace-only logging for a framework agent: no audit event, only OpenTelemetry spans, exported as OTLP JSON
lines to ``HARNESS_TRACE_FILE`` (harness.otel.exporter). The harness reads them as events (docs/otel.md)
and judges them with the same rules as an audit log.

What is recorded, per intent: an operation span around the framework run (``harness.operation.id``: the
framework's own spans below it, its tool calls included, belong to that operation, whatever call id the
framework gives each retry); one HTTP client span per request the tool sends (``http.request.method``,
``url.full``, ``http.response.status_code`` or ``error.type``, the key, ``http.request.resend_count``), made
current while it is sent so the propagated ``traceparent`` names it; one span per lookup
(``harness.observation.source``); and a ``harness.resolution`` event on the operation span, citing the span
ids that prove it. The interface the tools read (``TracedOperation``) is harness.instrument's Operation's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import requests
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from harness.agents.frameworks import scope as framework_scope
from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.fingerprint import fingerprint
from harness.model.agent import (
    Attempt,
    Observation,
    answered_5xx,
    closing_resolution,
    decide_resolution,
    derive_key,
    is_attempt,
    observations_since_last_attempt,
)

PROPAGATOR = TraceContextTextMapPropagator()


def span_id(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


class TracedOperation:
    """One intent's operation, recorded as spans; what the tools read of it is harness.instrument's
    Operation's: ``operation_id``, ``idempotency_key``, ``destination``, ``kind``, ``attempts``,
    ``last_attempt``, ``effect_refs``, ``effect_ref``."""

    def __init__(self, tracer: Tracer, intent: dict[str, Any], contract: dict[str, Any], session_id: str) -> None:
        self.tracer, self.intent, self.contract = tracer, intent, contract
        self.destination, self.kind = intent["destination"], intent["kind"]
        self.operation_id = "op_" + uuid.uuid4().hex[:12]
        self.idempotency_key = derive_key(self.operation_id)
        self.session_id = session_id
        self.history: list[Attempt | Observation] = []  # the attempts and observations, in order
        self.http = TracedSession(self)

    @property
    def attempts(self) -> list[Attempt]:
        return [r for r in self.history if isinstance(r, Attempt)]

    @property
    def observations(self) -> list[Observation]:
        return [r for r in self.history if isinstance(r, Observation)]

    @property
    def last_attempt(self) -> Attempt | None:
        attempts = self.attempts
        return attempts[-1] if attempts else None

    @property
    def effect_refs(self) -> list[str]:
        """The effect refs the evidence names so far (harness.model's resolution)."""
        return decide_resolution(self.history).effect_refs

    @property
    def effect_ref(self) -> str | None:
        return self.effect_refs[0] if self.effect_refs else None

    @contextmanager
    def scope(self) -> Iterator[TracedOperation]:
        """The operation span around the framework run; its resolution event when it ends."""
        attributes = {"harness.operation.id": self.operation_id, "harness.intent.id": self.intent["intent_id"],
                      "harness.intent.kind": self.kind, "harness.destination": self.destination,
                      "harness.intent.params": json.dumps(self.intent["params"]),
                      "harness.operation.owner": self.session_id, "harness.idempotency_key": self.idempotency_key}
        with self.tracer.start_as_current_span(f"operation {self.kind}", attributes=attributes) as span:
            with framework_scope.opened(self):
                yield self
                resolution = self.resolution()
                if resolution["harness.state"] == "duplicate_effect_confirmed":
                    resolution["harness.correction_operation_id"] = self.correction(resolution["harness.effect_refs"])
                span.add_event("harness.resolution", resolution)

    @contextmanager
    def execution(self) -> Iterator[None]:
        """One execution of the tool (inside the framework's tool span). An execution that only looked the
        effect up, and sent nothing, is that lookup: the tool span becomes the observation, since a tool span
        with no request below it would read as an attempt of its own."""
        before = len(self.attempts), len(self.observations)
        tool_span = get_current_span()
        # the framework's tool span names its call id (gen_ai.tool.call.id), new for each retry the model makes:
        # the operation id on it says which operation that call belongs to
        tool_span.set_attribute("harness.operation.id", self.operation_id)
        try:
            yield
        finally:
            looked = self.observations[before[1]:]
            if len(self.attempts) == before[0] and looked:
                last = looked[-1]
                tool_span.set_attributes({"harness.observation.source": "lookup",
                                          "harness.observation.found": bool(last.found),
                                          "harness.effect_refs": last.effect_refs})
                last.observation_id = span_id(tool_span)

    def resolution(self) -> dict[str, Any]:
        """The state the evidence supports (harness.model's resolution, as harness.instrument writes it)."""
        state, refs, evidence, reason = closing_resolution(self.history)
        return {"harness.state": state, "harness.effect_refs": refs, "harness.evidence": evidence,
                "harness.reason": reason}

    def correction(self, refs: list[str]) -> str:
        """Two records for one intent: the correction is a new operation, waiting for an operator."""
        correction = "op_" + uuid.uuid4().hex[:12]
        attributes = {"harness.operation.id": correction, "harness.operation.correction_of_id": self.operation_id,
                      "harness.operation.owner": "operator", "harness.intent.kind": "compensate_duplicate",
                      "harness.destination": self.destination,
                      "harness.intent.params": json.dumps({"effect_refs": refs[1:]})}
        with self.tracer.start_as_current_span("operation compensate_duplicate", attributes=attributes):
            pass
        return correction


class TracedSession:
    """A requests session whose every request is a span: a lookup an observation span, anything else an
    attempt's HTTP client span. ``request`` and ``get`` as requests.Session's."""

    def __init__(self, op: TracedOperation) -> None:
        self.op = op
        self.session = requests.Session()

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", url, **kwargs)

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        lookup = self.op.contract.get("lookup") or {}
        if method == lookup.get("method") and urlsplit(url).path == lookup.get("path"):
            return self._lookup(method, url, lookup, **kwargs)
        return self._attempt(method, url, **kwargs)

    def _lookup(self, method: str, url: str, lookup: dict[str, Any], **kwargs: Any) -> requests.Response:
        with self.op.tracer.start_as_current_span("lookup", kind=SpanKind.CLIENT, attributes={
                "harness.observation.source": "lookup", "http.request.method": method, "url.full": url}) as span:
            record = Observation(span_id(span), "lookup")
            self.op.history.append(record)
            try:
                response = self.session.request(method, url, **kwargs)
            except requests.RequestException as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise
            span.set_attribute("http.response.status_code", response.status_code)
            if response.ok:
                field_name = self.op.contract["operations"][self.op.kind]["effect_ref_field"]
                items = response.json().get(lookup["result_field"]) or []
                record.found, record.effect_refs = bool(items), [str(i[field_name]) for i in items]
                record.lag_possible = False if not items else None
                span.set_attributes({"harness.observation.found": record.found,
                                     "harness.effect_refs": record.effect_refs,
                                     "harness.observation.lag_possible": False})
            return response

    def _attempt(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        op = self.op
        headers = dict(kwargs.pop("headers", None) or {})
        body = kwargs.get("json")
        idem = op.contract["idempotency"]
        key = (body or {}).get(idem["body_field"]) if idem.get("body_field") else \
            headers.get(idem.get("header") or "Idempotency-Key")
        number = len(op.attempts) + 1
        attributes: dict[str, Any] = {"http.request.method": method, "url.full": url,
                                      "harness.retry.budget_remaining": max(0, MAX_EXECUTIONS - number)}
        if body is not None:
            attributes["harness.request.fingerprint"] = fingerprint(body)
        if key:
            attributes["harness.idempotency_key"] = key
        if number > 1:
            attributes.update({"http.request.resend_count": number - 1, "harness.retry.decision": self._decision(key)})
        with op.tracer.start_as_current_span(method, kind=SpanKind.CLIENT, attributes=attributes) as span:
            PROPAGATOR.inject(headers)  # traceparent 00-<trace>-<this span>-01: the journal matches the attempt
            record = Attempt(span_id(span))
            op.history.append(record)
            try:
                response = self.session.request(method, url, headers=headers, **kwargs)
            except requests.RequestException as exc:
                not_sent = isinstance(exc, requests.ConnectTimeout) or "NewConnectionError" in repr(exc)
                record.dispatch_state = "not_sent" if not_sent else "sent_no_response"
                span.set_attribute("error.type", "NewConnectionError" if not_sent and not isinstance(
                    exc, requests.ConnectTimeout) else type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
                raise
            record.dispatch_state, record.http_status = "response_received", response.status_code
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code == 429 and response.headers.get("Retry-After"):
                span.set_attribute("harness.retry_after_seconds", float(response.headers["Retry-After"]))
            if response.ok:
                try:
                    ref = response.json().get(op.contract["operations"][op.kind]["effect_ref_field"])
                except ValueError:
                    ref = None
                if ref:
                    record.effect_refs = [str(ref)]
                    span.set_attribute("harness.effect_refs", record.effect_refs)
            elif answered_5xx(response.status_code):
                span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code}"))
            return response

    def _decision(self, key: str | None) -> str:
        """What the records show about this retry, in words (as harness.instrument says it)."""
        idem = self.op.contract["idempotency"]
        if key and idem["style"] != "none" and key == self.op.idempotency_key:
            return "retry: destination deduplicates this idempotency key and it is within retention"
        if any(is_attempt(r) for r in self.op.history) and \
                any(o.found is False for o in observations_since_last_attempt(self.op.history)):
            return "retry: reconciliation lookup found no effect"
        return "retry with no deduplication in force and no observation since the unknown attempt"
