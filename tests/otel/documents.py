"""Hand-made OTLP JSON documents, written as the OTLP JSON encoding says (not through the SDK): the reader is
tested on what any exporter (the Collector's file exporter, another language's SDK) may write."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

TRACE = "5b8efff798038103d269b633813fc60c"
T0 = 1_796_000_000_000_000_000  # unix nanoseconds
SECOND = 1_000_000_000


def value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # int64 is a JSON string in OTLP JSON
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": v}


def attrs(**kv: Any) -> list[dict[str, Any]]:
    return [{"key": k.replace("__", "."), "value": value(v)} for k, v in kv.items()]


def span(span_id: str, name: str, start: float, end: float, attributes: dict[str, Any], *, parent: str | None = None,
         kind: int = 3, events: list[dict[str, Any]] | None = None, status: int = 0, trace: str = TRACE,
         base64_ids: bool = False) -> dict[str, Any]:
    def enc(hex_id: str) -> str:
        return base64.b64encode(bytes.fromhex(hex_id)).decode() if base64_ids else hex_id

    doc: dict[str, Any] = {"traceId": enc(trace), "spanId": enc(span_id), "name": name, "kind": kind,
                           "startTimeUnixNano": str(int(T0 + start * SECOND)),
                           "endTimeUnixNano": str(int(T0 + end * SECOND)),
                           "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
                           "status": {"code": status}}
    if parent:
        doc["parentSpanId"] = enc(parent)
    if events:
        doc["events"] = events
    return doc


def event(name: str, at: float, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "timeUnixNano": str(int(T0 + at * SECOND)),
            "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()]}


def request(*spans: dict[str, Any], session: str = "ses_agent1") -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "agent"}},
        {"key": "service.instance.id", "value": {"stringValue": session}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}


OP = {"harness.operation.id": "op_1", "harness.intent.id": "printer-on-fire", "harness.intent.kind": "create_ticket",
      "harness.destination": "tickets", "harness.idempotency_key": "key_1"}
URL = "http://127.0.0.1:9/tickets"


def response_lost(*, base64_ids: bool = False) -> list[dict[str, Any]]:
    """The healthy story of response_lost as spans: the attempt lost its answer, the lookup found the ticket,
    the resolution cites the lookup. Two export lines, the operation span (ending last) in the second."""
    ids = {"base64_ids": base64_ids}
    attempt = span("00000000000000a1", "POST", 0.1, 1.6, {
        "http.request.method": "POST", "url.full": URL, "harness.idempotency_key": "key_1",
        "error.type": "ConnectionError", "harness.retry.budget_remaining": 2}, parent="00000000000000f0", status=2,
        **ids)
    lookup = span("00000000000000b1", "lookup", 1.7, 1.8, {
        "harness.observation.source": "lookup", "http.request.method": "GET", "url.full": URL,
        "http.response.status_code": 200, "harness.observation.found": True, "harness.effect_refs": ["tkt_0001"]},
        parent="00000000000000f0", **ids)
    operation = span("00000000000000f0", "operation create_ticket", 0.0, 2.0, OP, kind=1, events=[
        event("harness.resolution", 1.9, {"harness.state": "succeeded", "harness.effect_refs": ["tkt_0001"],
                                          "harness.evidence": ["00000000000000b1"]})], **ids)
    return [request(attempt, lookup), request(operation)]


def write(path: Path, documents: list[dict[str, Any]] | list[str]) -> Path:
    path.write_text("".join((d if isinstance(d, str) else json.dumps(d)) + "\n" for d in documents), encoding="utf-8")
    return path
