"""A trace-only agent: it writes no audit event, only OpenTelemetry spans (the SDK, exported as OTLP JSON lines
to ``HARNESS_TRACE_FILE`` by ``harness.otel.exporter``). Run it with ``agent_log: otel`` (or ``--agent`` on a
scenario that says so): the harness reads its spans as events and judges them with the same rules.

    python -m harness.agents.otel.traced

What it records, per intent (docs/otel.md): an operation span (``harness.operation.id``, the intent, the key);
one HTTP client span per attempt (``http.request.method``, ``url.full``, ``http.response.status_code`` or
``error.type``, ``http.request.resend_count`` on a retry, the key header), made current while the request is
sent so the ``traceparent`` it propagates names that span; one span per lookup or status poll
(``harness.observation.source``); and a ``harness.resolution`` span event citing the span ids that prove it.
Its policy is the reference agent's: after an unknown outcome look the effect up, wait out the documented lag,
and retry only when a lookup proved absence or the key deduplicates within retention. HTTP destinations only.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import requests
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from harness.contract import INTENTS_ENV, destination_env_name, secret_env_name
from harness.fingerprint import fingerprint
from harness.model.agent import (
    Attempt,
    Observation,
    closing_resolution,
    derive_key,
    may_have_acted,
    retry_reason_after,
)
from harness.otel.exporter import tracer_provider

TIMEOUT = (1.0, 1.5)  # connect, read: the catalogue's client timeout
MAX_ATTEMPTS = 3
MAX_RETRY_AFTER = 5.0
PROPAGATOR = TraceContextTextMapPropagator()

KeyFor = Callable[[str, int], str]  # (operation id, attempt number) -> the key sent


def span_id(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


class Agent:
    def __init__(self, tracer: Tracer, session_id: str, key_for: KeyFor | None = None,
                 blind_retry: bool = False) -> None:
        self.tracer, self.session_id, self.key_for, self.blind_retry = tracer, session_id, key_for, blind_retry
        self.http = requests.Session()
        with open(os.environ[INTENTS_ENV], encoding="utf-8") as f:
            self.doc = json.load(f)

    # -- one intent -----------------------------------------------------------------------------------------
    def carry_out(self, intent: dict[str, Any]) -> None:
        contract = self.doc["destinations"][intent["destination"]]
        kind = contract["operations"][intent["kind"]]
        idem = contract["idempotency"]
        op_id = "op_" + uuid.uuid4().hex[:12]
        key = derive_key(op_id) if idem["style"] != "none" else None
        body = {**(kind.get("body_defaults") or {}), **intent["params"], kind["client_reference_field"]: op_id}
        if key and idem.get("body_field"):
            body[idem["body_field"]] = key
        attributes = {"harness.operation.id": op_id, "harness.intent.id": intent["intent_id"],
                      "harness.intent.kind": intent["kind"], "harness.destination": intent["destination"],
                      "harness.intent.params": json.dumps(intent["params"]), "harness.operation.owner": self.session_id,
                      "harness.payload_fingerprint": fingerprint(body)}
        if key:
            attributes["harness.idempotency_key"] = key
        with self.tracer.start_as_current_span(f"operation {intent['kind']}", attributes=attributes) as op:
            self.op = {"id": op_id, "span": op, "intent": intent, "contract": contract, "kind": kind, "key": key,
                       "body": body, "attempts": [], "history": [], "first_sent": None, "last_sent": 0.0,
                       "path": kind["path"].format(**intent["params"])}
            self.dispatch_loop()
            self.resolve()

    def resolve(self) -> None:
        """The resolution the evidence supports (harness.model's), as a span event; a duplicate's correction is
        a new operation, waiting for an operator."""
        state, refs, evidence, reason = closing_resolution(self.op["history"])
        event: dict[str, Any] = {"harness.state": state, "harness.effect_refs": refs,
                                 "harness.evidence": evidence, "harness.reason": reason}
        if state == "duplicate_effect_confirmed":
            event["harness.correction_operation_id"] = self.duplicate(refs)
        self.op["span"].add_event("harness.resolution", event)

    def dispatch_loop(self) -> None:
        """Attempt until the evidence settles the intent, or nothing makes another attempt safe; the
        resolution is then the one the history supports."""
        op = self.op
        step: tuple[str | None, str | None] | None = (None, None)
        while step is not None and len(op["attempts"]) < MAX_ATTEMPTS:
            state, status, body = self.attempt(*step)
            reason = retry_reason_after(state, status)
            if state == "not_sent":
                step = "connection_not_established", "retry: the connection was never established"
            elif status == 429:
                time.sleep(min(float(body.get("retry_after", 1)), MAX_RETRY_AFTER))
                step = "rate_limited", "retry: a 429 means the destination did not act"
            elif status is not None and 200 <= status < 300:
                return self.succeeded(status, body)
            elif reason is not None and may_have_acted(state, status):  # lost, 5xx, 408, 409, 425
                step = self.after_unknown(reason)
            else:  # refused: the destination did not act
                return None
        return None

    # -- one attempt: one HTTP client span ------------------------------------------------------------------
    def attempt(self, reason: str | None, decision: str | None) -> tuple[str, int | None, dict[str, Any]]:
        op = self.op
        idem = op["contract"]["idempotency"]
        number = len(op["attempts"]) + 1
        key = self.key_for(op["id"], number) if self.key_for and op["key"] else op["key"]
        body = dict(op["body"])
        headers = self.auth()
        if key and idem.get("body_field"):
            body[idem["body_field"]] = key
        elif key:
            headers[idem["header"]] = key
        url = self.base() + op["path"]
        method = op["kind"]["method"]
        attributes: dict[str, Any] = {"http.request.method": method, "url.full": url,
                                      "harness.request.fingerprint": fingerprint(body),
                                      "harness.retry.budget_remaining": MAX_ATTEMPTS - number}
        if key:
            attributes["harness.idempotency_key"] = key
        if number > 1:
            attributes.update({"http.request.resend_count": number - 1, "harness.retry.reason": reason,
                               "harness.retry.decision": decision})
        with self.tracer.start_as_current_span(method, kind=SpanKind.CLIENT, attributes=attributes) as span:
            PROPAGATOR.inject(headers)  # traceparent 00-<trace>-<this span>-01: the journal matches the attempt
            op["first_sent"] = op["first_sent"] or time.time()
            op["last_sent"] = time.time()
            state, status, answer = self.send(span, method, url, body, headers)
            op["attempts"].append(span_id(span))
            ref = answer.get(op["kind"]["effect_ref_field"]) if status and status < 300 else None
            if ref:
                span.set_attribute("harness.effect_refs", [str(ref)])
            op["history"].append(Attempt(span_id(span), state, status, effect_refs=[str(ref)] if ref else []))
            return state, status, answer

    def send(self, span: Span, method: str, url: str, body: dict[str, Any],
             headers: dict[str, str]) -> tuple[str, int | None, dict[str, Any]]:
        try:
            response = self.http.request(method, url, json=body, headers={"Connection": "close", **headers},
                                         timeout=TIMEOUT)
        except requests.RequestException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
            refused = isinstance(exc, requests.ConnectTimeout) or "NewConnectionError" in repr(exc)
            if refused:
                span.set_attribute("error.type", "ConnectTimeout" if isinstance(exc, requests.ConnectTimeout)
                                   else "NewConnectionError")
            return ("not_sent" if refused else "sent_no_response"), None, {}
        span.set_attribute("http.response.status_code", response.status_code)
        if response.status_code >= 400:
            span.set_attribute("error.type", str(response.status_code))
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        answer = answer if isinstance(answer, dict) else {}
        if response.status_code == 429:
            retry_after = response.headers.get("Retry-After", "1")
            span.set_attribute("harness.retry_after_seconds", float(retry_after))
            answer["retry_after"] = retry_after
        return "response_received", response.status_code, answer

    # -- after an unknown outcome ---------------------------------------------------------------------------
    def after_unknown(self, reason: str) -> tuple[str, str] | None:
        op = self.op
        if self.blind_retry:
            return reason, "retry: the request failed"
        if op["contract"]["lookup"]:
            refs, absent = self.lookup()
            if refs:  # found (one effect, or several: a duplicate)
                return None
            if absent:
                return reason, "retry: the lookup found no effect after waiting out the index lag"
        idem = op["contract"]["idempotency"]
        retention = idem["retention_seconds"]
        if op["key"] and (retention is None or time.time() - op["first_sent"] < 0.9 * retention):
            return reason, "retry: the destination deduplicates this key and it is within retention"
        return None  # no evidence either way: unknown, escalated to an operator

    def lookup(self, source: str = "lookup") -> tuple[list[str], bool]:
        op = self.op
        spec = op["contract"]["lookup"]
        lag = spec.get("lag_seconds") or 0.0
        negatives = 0
        for _ in range(12):
            url = f"{self.base()}{spec['path']}"
            attributes = {"harness.observation.source": source, "http.request.method": spec["method"], "url.full": url}
            with self.tracer.start_as_current_span("lookup", kind=SpanKind.CLIENT, attributes=attributes) as span:
                found, refs = None, []
                try:
                    response = self.http.get(url, params={spec["query_param"]: op["id"]}, headers=self.auth(),
                                             timeout=TIMEOUT)
                    span.set_attribute("http.response.status_code", response.status_code)
                    if response.ok:
                        items = response.json()[spec["result_field"]]
                        refs = [str(item[op["kind"]["effect_ref_field"]]) for item in items]
                        found = bool(refs)
                except (requests.RequestException, ValueError, KeyError) as exc:
                    span.set_attribute("error.type", type(exc).__name__)
                within_lag = time.time() - op["last_sent"] < lag * 1.5
                if found is not None:
                    span.set_attribute("harness.observation.found", found)
                span.set_attribute("harness.effect_refs", refs)
                if found is False:
                    span.set_attribute("harness.observation.lag_possible", within_lag)
                op["history"].append(Observation(span_id(span), source, found, refs,
                                                 within_lag if found is False else None))
            if found:
                return refs, False
            if found is False:
                negatives += 1
                if negatives >= 3 and not within_lag:
                    return [], True
            time.sleep(0.2 if found is False else 0.5)
        return [], False

    def duplicate(self, refs: list[str]) -> str:
        """Open the correction of a duplicate: a new operation, waiting for an operator."""
        op = self.op
        correction = "op_" + uuid.uuid4().hex[:12]
        attributes = {"harness.operation.id": correction, "harness.operation.correction_of_id": op["id"],
                      "harness.operation.owner": "operator", "harness.intent.kind": "compensate_duplicate",
                      "harness.destination": op["intent"]["destination"],
                      "harness.intent.params": json.dumps({"effect_refs": refs[1:]})}
        with self.tracer.start_as_current_span("operation compensate_duplicate", attributes=attributes):
            pass
        return correction

    def succeeded(self, status: int, body: dict[str, Any]) -> None:
        op = self.op
        if status == 202 and isinstance(body.get("operation"), dict):  # accepted, not done: poll its status
            return self.poll(body["operation"]["status_url"])
        if op["contract"]["idempotency"]["style"] == "none" and op["contract"]["lookup"]:
            self.lookup("read_after_write")  # one 2xx does not prove one effect
        return None

    def poll(self, status_url: str) -> None:
        for wait in (0.2, 0.3, 0.5, 0.5, 1.0, 1.0, 2.0):
            time.sleep(wait)
            url = self.base() + status_url
            attributes = {"harness.observation.source": "status_poll", "http.request.method": "GET", "url.full": url}
            with self.tracer.start_as_current_span("status poll", kind=SpanKind.CLIENT, attributes=attributes) as span:
                response = self.http.get(url, headers=self.auth(), timeout=TIMEOUT)
                span.set_attribute("http.response.status_code", response.status_code)
                answer = response.json()
                done = answer.get("status") == "succeeded"
                refs = [str(answer["effect_ref"])] if done else []
                span.set_attribute("harness.observation.found", done)
                span.set_attribute("harness.effect_refs", refs)
                self.op["history"].append(Observation(span_id(span), "status_poll", done, refs,
                                                      status=answer.get("status")))
            if done or answer.get("status") == "failed":
                return None
        return None  # still pending: unknown, escalated

    def base(self) -> str:
        return os.environ[destination_env_name(self.op["intent"]["destination"])].rstrip("/")

    def auth(self) -> dict[str, str]:
        token = os.environ.get(secret_env_name(self.op["intent"]["destination"]))
        return {"Authorization": f"Bearer {token}"} if token else {}


def main(key_for: KeyFor | None = None, blind_retry: bool = False) -> None:
    """``key_for`` and ``blind_retry`` exist for the deliberately wrong twins beside this file."""
    session_id = "ses_" + uuid.uuid4().hex[:12]
    provider = tracer_provider(service_name="otel-agent", attributes={"service.instance.id": session_id})
    agent = Agent(provider.get_tracer("harness.agents.otel"), session_id, key_for, blind_retry)
    try:
        for intent in agent.doc["intents"]:
            agent.carry_out(intent)
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
