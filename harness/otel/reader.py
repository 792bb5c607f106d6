"""OTLP JSON -> our audit events: one implementation, for a scenario's run (``agent_log: otel``), ``check``
and the offline audit (``audit FILE --format otlp``). The mapping is docs/otel.md's table.

The file is what the OpenTelemetry Collector's file exporter writes (one ``ExportTraceServiceRequest`` JSON
object a line, ``{"resourceSpans": [...]}``), or one such document, pretty-printed or not. Trace and span ids
are hex (the OTLP JSON encoding) or base64 (protobuf's own JSON mapping of bytes); both are read.

What comes out is a "derived log": items in the order an agent would have logged them (an operation when its
span started, an attempt or an observation when its span ended, a resolution at its span event's time), each
either an event (validated as an audit-log line, with an ``otel`` field naming the span it was read from) or a
problem: a line or a span that cannot be read, or a span that lacks what the mapping needs (an HTTP client
span of no operation, an attempt that says neither whether it was answered nor how it failed). A problem is
reported by rule H000 like a malformed log line: never a silent pass.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from harness.errors import EvidenceError
from harness.events import RETRY_REASONS, parse_line
from harness.limits import collector_paused

# -- the attributes read (docs/otel.md). Semantic conventions first; ours (harness.*) where they have none.
OPERATION_ID = "harness.operation.id"  # semconv has no operation across attempts (semantic-conventions#4025)
TOOL_CALL_ID = "gen_ai.tool.call.id"  # a framework that re-executes a tool call keeps its id
INTENT_ID, INTENT_KIND, INTENT_PARAMS = "harness.intent.id", "harness.intent.kind", "harness.intent.params"
DESTINATION = "harness.destination"
IDEMPOTENCY_KEY = "harness.idempotency_key"
IDEMPOTENCY_HEADER = "http.request.header.idempotency-key"
PAYLOAD_FINGERPRINT = "harness.payload_fingerprint"
REQUEST_FINGERPRINT = "harness.request.fingerprint"
OWNER, SUPERSEDES = "harness.operation.owner", "harness.operation.supersedes_id"
CORRECTION_OF, PARENT_OPERATION = "harness.operation.correction_of_id", "harness.operation.parent_id"
ATTEMPT_ID, DISPATCH_STATE, EFFECT_REFS = "harness.attempt.id", "harness.dispatch_state", "harness.effect_refs"
RETRY_OF, RETRY_REASON = "harness.retry.of_attempt_id", "harness.retry.reason"
RETRY_DECISION, BUDGET = "harness.retry.decision", "harness.retry.budget_remaining"
RETRY_AFTER, WORKER, SESSION = "harness.retry_after_seconds", "harness.worker", "harness.session.id"
OBSERVATION_SOURCE, OBSERVATION_ID = "harness.observation.source", "harness.observation.id"
OBSERVATION_FOUND, LAG_POSSIBLE = "harness.observation.found", "harness.observation.lag_possible"
HTTP_METHOD, URL_FULL, URL_PATH = "http.request.method", "url.full", "url.path"
HTTP_STATUS, RESEND_COUNT, ERROR_TYPE = "http.response.status_code", "http.request.resend_count", "error.type"
MCP_METHOD, TOOL_NAME, GEN_AI_OPERATION = "mcp.method.name", "gen_ai.tool.name", "gen_ai.operation.name"
SERVICE_INSTANCE = "service.instance.id"  # resource attribute: one process of the agent, our session
# span events
RESOLUTION_EVENT, APPROVAL_EVENT = "harness.resolution", "harness.approval"
STATE, EVIDENCE, REASON = "harness.state", "harness.evidence", "harness.reason"
CORRECTION_OPERATION = "harness.correction_operation_id"

SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
              "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
CLIENT_KINDS = (0, 3)  # an HTTP span of kind server (or consumer...) is someone else's request, not an attempt
STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
STATUS_ERROR = 2
# error.type values (exception class names, lower-cased) that prove the request never left: nothing was sent
NOT_SENT_ERRORS = ("connecttimeout", "newconnectionerror", "connectionrefused", "connection_refused",
                   "connect_timeout", "nameresolutionerror")
TOOL_ERROR = "tool_error"  # MCP semconv: error.type of a tools/call whose result is an error (isError)


@dataclass
class SpanEvent:
    name: str
    time: float
    attributes: dict[str, Any]


@dataclass
class Span:
    line: int  # of the file
    where: str  # key path in that line's document
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int
    start: float  # unix seconds
    end: float
    attributes: dict[str, Any]
    events: list[SpanEvent]
    status_code: int
    status_message: str
    resource: dict[str, Any]
    flags: int = 0

    @property
    def traceparent(self) -> str:
        """The W3C traceparent that names this span. OTLP keeps the trace flags only when the exporter writes
        them (``flags``' low byte; the Python SDK's encoder does not): sampled (01) otherwise. The evidence
        loader takes the flags the wire saw for the same trace and span id."""
        return f"00-{self.trace_id}-{self.span_id}-{(self.flags & 0xFF) or 1:02x}"

    def ref(self, event: str | None = None) -> dict[str, Any]:
        """Where an event came from, kept in the event (``otel``): the file's line, the span, what it held."""
        out: dict[str, Any] = {"line": self.line, "trace_id": self.trace_id, "span_id": self.span_id,
                               "span": self.name, "attributes": self.attributes}
        if self.status_message:
            out["status_message"] = self.status_message
        if event:
            out["event"] = event
        return out


@dataclass
class DerivedLog:
    """The events read from one trace, in log order: ``items[n - 1]`` is line n, ``(record, error, text)``
    with ``record`` None for a problem (``error`` says it). ``spans``: how many spans were read."""

    name: str
    items: list[tuple[dict[str, Any] | None, str | None, str]] = field(default_factory=list)
    spans: int = 0

    @property
    def events(self) -> int:
        return sum(1 for record, _, _ in self.items if record is not None)


class _Bad(ValueError):
    """One value of the document that cannot be read: its key path and why."""


# -- decoding the document -----------------------------------------------------------------------------------

def _id(value: Any, size: int, where: str) -> str:
    """A trace id (16 bytes) or span id (8 bytes) as lower-case hex, from hex or base64."""
    if not isinstance(value, str):
        raise _Bad(f"{where}: expected a string, got {json.dumps(value)[:60]}")
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise _Bad(f"{where}: {value!r} is neither {2 * size} hex digits nor the base64 of {size} bytes")
    return raw.hex()


def _nanos(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Bad(f"{where}: expected unix nanoseconds (an integer, or its decimal string), got "
                   f"{json.dumps(value)[:60]}")
    try:
        nanos = int(value)
    except ValueError:
        raise _Bad(f"{where}: {value!r} is not unix nanoseconds (a decimal integer)") from None
    if nanos < 0:
        raise _Bad(f"{where}: {value!r} is a negative time")
    return nanos / 1e9


_NOT_SIMPLE = object()


def _simple(value: Any) -> Any:
    """The common AnyValue (one string, boolean or integer) read without building its key path (``_value``, the
    careful reading that names what is wrong, reads the rest)."""
    if value.__class__ is dict and len(value) == 1:
        if (inner := value.get("stringValue")) is not None and inner.__class__ is str:
            return inner
        if (inner := value.get("intValue")) is not None and inner.__class__ is str and inner.isdecimal() \
                and len(inner) < 20:  # int() refuses some of what isdigit() allows, and 4,300 digits
            return int(inner)
        if (inner := value.get("boolValue")) is not None and inner.__class__ is bool:
            return inner
    return _NOT_SIMPLE


def _value(value: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` as a plain value."""
    if not isinstance(value, dict):
        raise _Bad(f"{where}: expected an AnyValue object ({{\"stringValue\": ...}}), got {json.dumps(value)[:60]}")
    if not value:
        return None
    (kind, inner), *rest = value.items()
    if rest:
        raise _Bad(f"{where}: an AnyValue holds one of stringValue, intValue, ...; got {', '.join(value)}")
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "intValue" and not isinstance(inner, bool) and isinstance(inner, (int, str)):
        try:
            number = int(inner)
        except ValueError:
            pass
        else:
            if -(1 << 63) <= number < 1 << 63:  # OTLP's int64: a larger one crashed writing the event
                return number
            raise _Bad(f"{where}: intValue {json.dumps(inner)[:60]} is beyond a 64-bit integer")
    if kind == "doubleValue" and not isinstance(inner, bool) and isinstance(inner, (int, float, str)):
        try:
            return float(inner)
        except ValueError:
            pass
    if kind == "arrayValue" and isinstance(inner, dict):
        items = [_simple(v) for v in _list(inner, "values", where)]
        return [_value(inner["values"][i], f"{where}.arrayValue.values[{i}]") if v is _NOT_SIMPLE else v
                for i, v in enumerate(items)]
    if kind == "kvlistValue" and isinstance(inner, dict):
        return _attributes(inner.get("values"), f"{where}.kvlistValue.values")
    if kind == "bytesValue" and isinstance(inner, str):
        return inner
    raise _Bad(f"{where}: {kind} {json.dumps(inner)[:60]} is not a value OTLP JSON allows (stringValue, boolValue, "
               f"intValue, doubleValue, arrayValue, kvlistValue, bytesValue)")


def _list(doc: dict[str, Any], key: str, where: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{where}.{key}: expected a list, got {json.dumps(value)[:60]}")
    return value


def _attributes(values: Any, where: str) -> dict[str, Any]:
    if values is None:
        return {}
    if not isinstance(values, list):
        raise _Bad(f"{where}: expected a list of {{\"key\", \"value\"}}, got {json.dumps(values)[:60]}")
    out = {}
    for i, item in enumerate(values):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise _Bad(f"{where}[{i}]: expected {{\"key\": str, \"value\": AnyValue}}, got {json.dumps(item)[:60]}")
        value = item.get("value", {})
        simple = _simple(value)
        out[item["key"]] = _value(value, f"{where}[{i}].value") if simple is _NOT_SIMPLE else simple
    return out


def _enum(value: Any, names: dict[str, int], where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value in names.values():
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise _Bad(f"{where}: {json.dumps(value)[:60]} is not one of {', '.join(names)} (or their numbers)")


def _flags(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise _Bad(f"{where}: expected the span's flags as a 32-bit unsigned integer, got {json.dumps(value)[:60]}")
    return value


def _span(doc: Any, line: int, where: str, resource: dict[str, Any]) -> Span:
    if not isinstance(doc, dict):
        raise _Bad(f"{where}: expected a span object, got {json.dumps(doc)[:60]}")
    if "traceId" not in doc or "spanId" not in doc:
        raise _Bad(f"{where}: a span needs traceId and spanId")
    parent = doc.get("parentSpanId") or None
    status = doc.get("status") or {}
    if not isinstance(status, dict):
        raise _Bad(f"{where}.status: expected an object, got {json.dumps(status)[:60]}")
    events = []
    for i, event in enumerate(_list(doc, "events", where)):
        at = f"{where}.events[{i}]"
        if not isinstance(event, dict):
            raise _Bad(f"{at}: expected an event object, got {json.dumps(event)[:60]}")
        events.append(SpanEvent(str(event.get("name", "")), _nanos(event.get("timeUnixNano", 0), f"{at}.timeUnixNano"),
                                _attributes(event.get("attributes"), f"{at}.attributes")))
    start = _nanos(doc.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
    return Span(line, where, _id(doc["traceId"], 16, f"{where}.traceId"), _id(doc["spanId"], 8, f"{where}.spanId"),
                _id(parent, 8, f"{where}.parentSpanId") if parent else None, str(doc.get("name", "")),
                _enum(doc.get("kind"), SPAN_KINDS, f"{where}.kind"), start,
                _nanos(doc.get("endTimeUnixNano", doc.get("startTimeUnixNano", 0)), f"{where}.endTimeUnixNano"),
                _attributes(doc.get("attributes"), f"{where}.attributes"), events,
                _enum(status.get("code"), STATUS_CODES, f"{where}.status.code"), str(status.get("message") or ""),
                resource, _flags(doc.get("flags"), f"{where}.flags"))


_HEX_ID = {16: re.compile("[0-9a-f]{32}").fullmatch, 8: re.compile("[0-9a-f]{16}").fullmatch}
_KINDS, _CODES = frozenset(SPAN_KINDS.values()), frozenset(STATUS_CODES.values())


def _fast_attributes(values: Any) -> dict[str, Any] | None:
    """``_attributes`` for a list of plain key/value pairs (one string, integer or boolean each), else None."""
    if values is None:
        return {}
    if values.__class__ is not list:
        return None
    out = {}
    for item in values:
        if item.__class__ is not dict or (key := item.get("key")).__class__ is not str:
            return None
        value = _simple(item.get("value", {}))
        if value is _NOT_SIMPLE:
            value = _fast_array(item.get("value"))
            if value is None:
                return None
        out[key] = value
    return out


def _fast_array(value: Any) -> list[Any] | None:
    """An arrayValue of simple values (an attribute's list of strings: effect refs, a header) as ``_value`` reads
    it, else None."""
    if value.__class__ is not dict or len(value) != 1 or (inner := value.get("arrayValue")).__class__ is not dict:
        return None
    items = inner.get("values")
    if items is None:
        return []
    if items.__class__ is not list:
        return None
    out = [_simple(item) for item in items]
    return None if _NOT_SIMPLE in out else out


def _fast_nanos(value: Any) -> float | None:
    if value.__class__ is str and value.isdecimal() and len(value) <= 20:  # int() refuses 4,300 digits
        return int(value) / 1e9
    if value.__class__ is int and value >= 0:
        return value / 1e9
    return None


def _fast_span(doc: Any, line: int, where: str, resource: dict[str, Any]) -> Span | None:
    """``_span`` for the shape exporters write (hex ids, times and plain attributes as OTLP JSON encodes them),
    without building a key path for every value; None for anything else, which ``_span`` reads and names. A
    property test holds the two equal (tests/otel/test_reader_properties.py)."""
    if doc.__class__ is not dict:
        return None
    trace_id, span_id, parent = doc.get("traceId"), doc.get("spanId"), doc.get("parentSpanId") or None
    if (trace_id.__class__ is not str or not _HEX_ID[16](trace_id) or span_id.__class__ is not str
            or not _HEX_ID[8](span_id) or (parent is not None and (parent.__class__ is not str
                                                                   or not _HEX_ID[8](parent)))):
        return None
    status = doc.get("status") or {}
    kind, flags, name = doc.get("kind"), doc.get("flags"), doc.get("name", "")
    if status.__class__ is not dict or name.__class__ is not str:
        return None
    code, message = status.get("code"), status.get("message") or ""
    if (kind.__class__ is not int or kind not in _KINDS) and kind is not None:
        return None
    if (code.__class__ is not int or code not in _CODES) and code is not None:
        return None
    if (flags.__class__ is not int or not 0 <= flags < 1 << 32) and flags is not None:
        return None
    if message.__class__ is not str:
        return None
    start = _fast_nanos(doc.get("startTimeUnixNano", 0))
    end = _fast_nanos(doc.get("endTimeUnixNano", doc.get("startTimeUnixNano", 0)))
    attributes = _fast_attributes(doc.get("attributes"))
    if start is None or end is None or attributes is None:
        return None
    events = []
    raw_events = doc.get("events")
    if raw_events is not None:
        if raw_events.__class__ is not list:
            return None
        for event in raw_events:
            if event.__class__ is not dict:
                return None
            event_name, at = event.get("name", ""), _fast_nanos(event.get("timeUnixNano", 0))
            event_attributes = _fast_attributes(event.get("attributes"))
            if event_name.__class__ is not str or at is None or event_attributes is None:
                return None
            events.append(SpanEvent(event_name, at, event_attributes))
    return Span(line, where, trace_id, span_id, parent, name, kind or 0, start, end, attributes, events, code or 0,
                message, resource, flags or 0)


# -- the typed decoding: a line of the common shape decoded into structs in C (msgspec), about half the time of
# orjson's dicts walked in Python. A line that does not fit (a doubleValue, a kind by name, a time as a JSON
# number, an unknown AnyValue...) or a span the checks below refuse is read again the careful way, which names
# what is wrong; a property test holds the two equal (tests/otel/test_reader_properties.py).

class _Value(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    stringValue: str | UnsetType = UNSET
    intValue: str | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    arrayValue: _Array | UnsetType = UNSET


class _Array(msgspec.Struct, frozen=True):
    values: list[_Value] | None = None


class _KeyValue(msgspec.Struct, frozen=True):
    key: str
    value: _Value


class _Event(msgspec.Struct, frozen=True):
    name: str = ""
    timeUnixNano: str | int = 0
    attributes: list[_KeyValue] | None = None


class _Status(msgspec.Struct, frozen=True):
    code: int | None = None
    message: str | None = None


class _TypedSpan(msgspec.Struct, frozen=True):
    traceId: str
    spanId: str
    parentSpanId: str | None = None
    name: str = ""
    kind: int | None = None
    startTimeUnixNano: str | int = 0
    endTimeUnixNano: str | int | UnsetType = UNSET
    attributes: list[_KeyValue] | None = None
    events: list[_Event] | None = None
    status: _Status | None = None
    flags: int | None = None


class _Scope(msgspec.Struct, frozen=True):
    spans: list[_TypedSpan] | None = None


class _Resource(msgspec.Struct, frozen=True):
    attributes: list[_KeyValue] | None = None


class _ResourceSpans(msgspec.Struct, frozen=True):
    resource: _Resource | None = None
    scopeSpans: list[_Scope] | None = None


class _Request(msgspec.Struct, frozen=True):
    resourceSpans: list[_ResourceSpans]


_REQUEST = msgspec.json.Decoder(_Request)


class _Refused(Exception):
    """A value the typed reading leaves to the careful one."""


def _typed_value(value: _Value) -> Any:
    if (text := value.stringValue) is not UNSET:
        if value.intValue is UNSET and value.boolValue is UNSET and value.arrayValue is UNSET:
            return text
    elif (number := value.intValue) is not UNSET:
        if value.boolValue is UNSET and value.arrayValue is UNSET and number.isdecimal() and len(number) < 20:
            return int(number)
    elif (flag := value.boolValue) is not UNSET:
        if value.arrayValue is UNSET:
            return flag
    elif (array := value.arrayValue) is not UNSET:
        return [_typed_value(item) for item in array.values or ()]
    raise _Refused


def _typed_attributes(pairs: list[_KeyValue] | None) -> dict[str, Any]:
    return {pair.key: _typed_value(pair.value) for pair in pairs} if pairs else {}


def _typed_nanos(value: str | int) -> float:
    if isinstance(value, str):
        if value.isdecimal() and len(value) <= 20:
            return int(value) / 1e9
    elif value >= 0:
        return value / 1e9
    raise _Refused


def _typed_spans(line: str, number: int) -> list[Span] | None:
    """The spans of one line of the common shape (``_spans_of``'s answer), else None."""
    try:
        request = _REQUEST.decode(line)
    except (msgspec.DecodeError, RecursionError):  # not JSON, not of this shape, or too deep: read carefully
        return None
    spans: list[Span] = []
    try:
        for r, resource_spans in enumerate(request.resourceSpans):
            resource = _typed_attributes(resource_spans.resource.attributes if resource_spans.resource else None)
            for s, scope in enumerate(resource_spans.scopeSpans or ()):
                for i, span in enumerate(scope.spans or ()):
                    spans.append(_typed_span(span, number, f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]",
                                             resource))
    except _Refused:
        return None
    return spans


def _typed_span(span: _TypedSpan, number: int, where: str, resource: dict[str, Any]) -> Span:
    trace_id, span_id, parent = span.traceId, span.spanId, span.parentSpanId or None
    status = span.status or _NO_STATUS
    code, kind, flags = status.code or 0, span.kind or 0, span.flags or 0
    if (not _HEX_ID[16](trace_id) or not _HEX_ID[8](span_id) or (parent is not None and not _HEX_ID[8](parent))
            or kind not in _KINDS or code not in _CODES or not 0 <= flags < 1 << 32):
        raise _Refused
    end = span.endTimeUnixNano
    return Span(number, where, trace_id, span_id, parent, span.name, kind, _typed_nanos(span.startTimeUnixNano),
                _typed_nanos(span.startTimeUnixNano if end is UNSET else end), _typed_attributes(span.attributes),
                [SpanEvent(event.name, _typed_nanos(event.timeUnixNano), _typed_attributes(event.attributes))
                 for event in span.events or ()], code, status.message or "", resource, flags)


_NO_STATUS = _Status()


def _spans_of(document: Any, line: int) -> Iterator[Span | str]:
    """The spans of one ExportTraceServiceRequest, or a problem (a string) for each part that cannot be read."""
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
        shown = json.dumps(document)[:80] if not isinstance(document, dict) else "keys " + ", ".join(document)[:80]
        yield f"expected an OTLP trace document {{\"resourceSpans\": [...]}}, got {shown or 'an empty object'}"
        return
    for r, resource_spans in enumerate(document["resourceSpans"]):
        where = f"resourceSpans[{r}]"
        try:
            if not isinstance(resource_spans, dict):
                raise _Bad(f"{where}: expected an object, got {json.dumps(resource_spans)[:60]}")
            resource = resource_spans.get("resource") or {}
            attributes = _attributes(resource.get("attributes") if isinstance(resource, dict) else None,
                                     f"{where}.resource.attributes")
            scopes = _list(resource_spans, "scopeSpans", where)
        except _Bad as exc:
            yield str(exc)
            continue
        for s, scope in enumerate(scopes):
            at = f"{where}.scopeSpans[{s}]"
            try:
                spans = _list(scope, "spans", at) if isinstance(scope, dict) else None
                if spans is None:
                    raise _Bad(f"{at}: expected an object with spans, got {json.dumps(scope)[:60]}")
            except _Bad as exc:
                yield str(exc)
                continue
            for i, doc in enumerate(spans):
                span_at = f"{at}.spans[{i}]"
                span = _fast_span(doc, line, span_at, attributes)
                if span is not None:
                    yield span
                    continue
                try:
                    yield _span(doc, line, span_at, attributes)
                except _Bad as exc:
                    yield str(exc)


def read_spans(path: Path, name: str | None = None) -> tuple[list[Span], list[tuple[int, str, str]]]:
    """Every span of the file, and each problem as (line, message, the line's text). Raises ``EvidenceError``
    only when the file cannot be read at all."""
    spans: list[Span] = []
    problems: list[tuple[int, str, str]] = []
    for item in iter_spans(path, name):
        if isinstance(item, Span):
            spans.append(item)
        else:
            problems.append(item)
    return spans, problems


def iter_spans(path: Path, name: str | None = None) -> Iterator[Span | tuple[int, str, str]]:
    """The spans of the file as they come, line by line (the file is never held whole unless it is one
    pretty-printed document), each problem as (line, message, the line's text)."""
    name = name or str(path)
    for number, chunk, document in _documents(Path(path), name):
        if document is _UNREAD and (typed := _typed_spans(chunk, number)) is not None:
            yield from typed
            continue
        if document is _UNREAD:
            document = _loads(chunk)
        if isinstance(document, orjson.JSONDecodeError):
            yield (number, f"{name} line {number}: not JSON ({document}); expected one OTLP "
                           "ExportTraceServiceRequest ({\"resourceSpans\": [...]}) a line", chunk)
            continue
        for item in _spans_of(document, number):
            yield (number, f"{name} line {number}: {item}", chunk) if isinstance(item, str) else item


def _documents(path: Path, name: str) -> Iterator[tuple[int, str, Any]]:
    """(line number, text, its JSON document, decoding error or ``_UNREAD``) for each line that is not blank, or
    one for a file that is one pretty-printed document. Lines are what ``str.splitlines`` cuts, as in the whole text."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise EvidenceError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    with handle:
        number, offset = 0, 0
        head: bytes | None = b""  # what was read before the first line that is not blank
        for raw in handle:
            text = _decoded(raw, offset, name)
            offset += len(raw)
            for line in text.splitlines():
                number += 1
                if not line.strip():
                    continue
                if head is not None and line.lstrip().startswith("{") and \
                        isinstance(_loads(line), orjson.JSONDecodeError):
                    # the first line opens a document it does not close: maybe one pretty-printed document
                    yield from _whole_text(_decoded(head + raw + handle.read(), 0, name), name)
                    return
                head = None
                yield number, line, _UNREAD
            if head is not None:
                head += raw


_UNREAD = object()  # a line not decoded yet


def _decoded(raw: bytes, offset: int, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvidenceError(f"{name}: not UTF-8 text at byte {offset + exc.start}: an OTLP JSON file is UTF-8") \
            from None


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return exc


def _whole_text(text: str, name: str) -> Iterator[tuple[int, str, Any]]:
    """The documents of a file read whole (its newlines read as ``open`` reads them: \\r and \\r\\n are \\n): one
    pretty-printed document, else its lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    stripped = text.lstrip()
    if "\n" in stripped.rstrip() and not isinstance(document := _loads(stripped), orjson.JSONDecodeError):
        yield text[: len(text) - len(stripped)].count("\n") + 1, text, document
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line, _loads(line)


# -- spans -> events ---------------------------------------------------------------------------------------

def _first(value: Any) -> Any:
    """A header attribute is a list of strings (semconv): its first value."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _refs(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class _Trace:
    """The spans of one file, indexed, with each span's operation and role."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans = spans
        self.by_id = {(s.trace_id, s.span_id): s for s in spans}
        self.children: dict[tuple[str, str], list[Span]] = {}
        for s in spans:
            if s.parent_id:
                self.children.setdefault((s.trace_id, s.parent_id), []).append(s)
        self._ops: dict[tuple[str, str], str | None] = {}

    def parent(self, span: Span) -> Span | None:
        return self.by_id.get((span.trace_id, span.parent_id)) if span.parent_id else None

    def ancestors(self, span: Span) -> Iterator[Span]:
        seen = set()
        parent = self.parent(span)
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            yield parent
            parent = self.parent(parent)

    def operation(self, span: Span) -> str | None:
        """The operation id: harness.operation.id on the span or its nearest ancestor, else gen_ai.tool.call.id."""
        key = (span.trace_id, span.span_id)
        if key not in self._ops:
            chain = [span, *self.ancestors(span)]
            found = next((str(s.attributes[OPERATION_ID]) for s in chain if s.attributes.get(OPERATION_ID)), None)
            if found is None:
                found = next((str(s.attributes[TOOL_CALL_ID]) for s in chain if s.attributes.get(TOOL_CALL_ID)), None)
            self._ops[key] = found
        return self._ops[key]

    def descendants(self, span: Span) -> Iterator[Span]:
        """Each span below this one, once: a span its own ancestor (a parent id that loops) ends the walk."""
        stack = list(self.children.get((span.trace_id, span.span_id), []))
        seen = {id(span)}
        while stack:
            child = stack.pop()
            if id(child) in seen:
                continue
            seen.add(id(child))
            yield child
            stack.extend(self.children.get((child.trace_id, child.span_id), []))


def _is_observation(span: Span) -> bool:
    return bool(span.attributes.get(OBSERVATION_SOURCE))


def _attempt_candidate(span: Span) -> bool:
    a = span.attributes
    if a.get(DISPATCH_STATE) or a.get(ATTEMPT_ID):
        return True
    if a.get(HTTP_METHOD) and span.kind in CLIENT_KINDS and (a.get(URL_FULL) or a.get(URL_PATH)):
        return True
    if a.get(MCP_METHOD) == "tools/call" and span.kind in CLIENT_KINDS:
        return True
    return a.get(GEN_AI_OPERATION) == "execute_tool" or span.name.startswith("execute_tool")


def _dispatch_state(span: Span) -> tuple[str | None, bool]:
    """(dispatch state, whether it was read from the outcome rather than given), None when nothing says."""
    a = span.attributes
    if a.get(DISPATCH_STATE):
        return str(a[DISPATCH_STATE]), False
    if a.get(HTTP_STATUS) is not None:
        return "response_received", True
    error = a.get(ERROR_TYPE)
    if error == TOOL_ERROR:
        return "response_received", True
    if error:
        text = str(error).lower().replace(".", "")
        return ("not_sent" if any(e in text for e in NOT_SENT_ERRORS) else "sent_no_response"), True
    if span.status_code == STATUS_ERROR:
        return "sent_no_response", True
    if (a.get(MCP_METHOD) or a.get(GEN_AI_OPERATION) == "execute_tool" or span.name.startswith("execute_tool")) \
            and not a.get(HTTP_METHOD):
        return "response_received", True  # a tool call that ended without an error returned its result
    return None, False


def _retry_reason(parent: dict[str, Any]) -> str:
    """What happened to the attempt retried, as the closed vocabulary names it (a span has no retry reason)."""
    status = parent.get("http_status")
    if parent.get("dispatch_state") == "not_sent":
        return "connection_not_established"
    if status == 429:
        return "rate_limited"
    if isinstance(status, int) and status >= 500:
        return "destination_5xx"
    if status in (401, 403):
        return "credential_refreshed"
    return "response_lost_after_dispatch"


def _describe(span: Span) -> str:
    return f"span {span.span_id} ({span.name!r}, trace {span.trace_id})"


def derive_events(spans: list[Span], name: str) -> tuple[list[tuple[float, int, dict[str, Any]]], list[str]]:
    """The events the spans carry, each with its sort key (when the agent knew it), and the problems."""
    trace = _Trace(spans)
    problems: list[str] = []
    out: list[tuple[float, int, dict[str, Any]]] = []

    def where(span: Span) -> str:  # only a problem names its span: not built for every span
        return f"{name} line {span.line}: {_describe(span)}"

    def session(span: Span) -> str:
        return str(span.attributes.get(SESSION) or span.resource.get(SERVICE_INSTANCE)
                   or f"otel:{span.resource.get('service.name', 'unknown_service')}")

    def base(span: Span, kind: str, ts: float, op_id: str, event: str | None = None) -> dict[str, Any]:
        return {"event": kind, "ts": ts, "session_id": session(span), "operation_id": op_id, "otel": span.ref(event)}

    # roles: an observation (and whatever it holds), else an attempt: the innermost candidate (an HTTP span
    # inside a tool span is the wire's truth; urllib3's span inside requests' is the resend)
    inside_observation: set[int] = set()
    for s in spans:
        if _is_observation(s):
            inside_observation.update(id(d) for d in trace.descendants(s))
    attempts: dict[str, list[Span]] = {}
    observations: list[Span] = []
    for s in spans:
        if id(s) in inside_observation:
            continue
        if _is_observation(s):
            observations.append(s)
            continue
        if not _attempt_candidate(s) or any(
                (_attempt_candidate(d) and id(d) not in inside_observation) or _is_observation(d)
                for d in trace.descendants(s)):
            continue  # a span around the wire's attempts or lookups (a framework's tool run) is no attempt itself
        op_id = trace.operation(s)
        if op_id is None:
            problems.append(f"{where(s)}: an attempt span of no operation: give it, or a span above it, "
                            f"{OPERATION_ID} (or {TOOL_CALL_ID}); it is not judged")
            continue
        attempts.setdefault(op_id, []).append(s)
    attempt_ids = {id(s) for group in attempts.values() for s in group}

    # operations: each span that carries an operation id its parent does not (one per process after a restart)
    declared: dict[str, list[Span]] = {}
    for s in spans:
        if not (s.attributes.get(OPERATION_ID) or s.attributes.get(TOOL_CALL_ID)) or id(s) in inside_observation:
            continue
        op_id = trace.operation(s)  # a tool call id under a span with harness.operation.id is that operation's
        if op_id is None:
            continue
        parent = trace.parent(s)
        if parent is not None and trace.operation(parent) == str(op_id):
            continue
        if id(s) in attempt_ids or _is_observation(s):
            continue  # declares its operation only when nothing else does (below)
        declared.setdefault(str(op_id), []).append(s)
    for op_id, group in attempts.items():
        if op_id not in declared:
            declared[op_id] = [min(group, key=lambda s: s.start)]
    intents: dict[str, dict[str, Any]] = {}
    for op_id, group in declared.items():
        for s in group:
            a = s.attributes
            record = base(s, "operation", s.start, op_id)
            intent = {k: v for k, v in (("kind", a.get(INTENT_KIND) or a.get(TOOL_NAME)),
                                        ("destination", a.get(DESTINATION)),
                                        ("params", _json_value(a.get(INTENT_PARAMS)))) if v is not None}
            if intent:
                record["intent"] = intent
                intents.setdefault(op_id, intent)
            for field_name, key in (("intent_id", INTENT_ID), ("idempotency_key", IDEMPOTENCY_KEY),
                                    ("payload_fingerprint", PAYLOAD_FINGERPRINT), ("owner", OWNER),
                                    ("supersedes_operation_id", SUPERSEDES),
                                    ("correction_of_operation_id", CORRECTION_OF),
                                    ("parent_operation_id", PARENT_OPERATION)):
                if a.get(key) is not None:
                    record[field_name] = str(a[key])
            record["state"] = "open"
            out.append((s.start, 0, record))

    for op_id, group in attempts.items():
        group.sort(key=lambda s: (s.start, s.end))
        previous: dict[str, Any] | None = None
        for number, s in enumerate(group, 1):
            a = s.attributes
            state, derived_state = _dispatch_state(s)
            if state is None:
                problems.append(f"{where(s)}: an attempt of {op_id} that carries neither {HTTP_STATUS} nor "
                                f"{ERROR_TYPE} (nor {DISPATCH_STATE}) and ended without an error status: whether "
                                "it was answered is unknown; it is not judged")
                continue
            record = base(s, "attempt", s.start, op_id)
            derived = ["dispatch_state"] if derived_state else []
            mcp = a.get(MCP_METHOD) or a.get(GEN_AI_OPERATION) == "execute_tool" or s.name.startswith("execute_tool")
            if a.get(HTTP_METHOD) and not a.get(MCP_METHOD):
                url = str(a.get(URL_FULL) or a.get(URL_PATH) or "")
                record["method"], record["path"] = str(a[HTTP_METHOD]).upper(), urlsplit(url).path or url
            elif mcp:
                record["method"], record["path"] = "tools/call", str(a.get(TOOL_NAME) or s.name)
            status = a.get(HTTP_STATUS)
            if status is None and mcp and state == "response_received":
                status = 200  # a tools/call result came back in a 200 (docs/otel.md)
            key = a.get(IDEMPOTENCY_KEY) or _first(a.get(IDEMPOTENCY_HEADER))
            destination = a.get(DESTINATION) or intents.get(op_id, {}).get("destination")
            record.update({k: v for k, v in (
                ("attempt_id", str(a.get(ATTEMPT_ID) or s.span_id)), ("attempt_number", number),
                ("destination", destination), ("idempotency_key", str(key) if key is not None else None),
                ("request_fingerprint", a.get(REQUEST_FINGERPRINT)), ("dispatch_state", state),
                ("http_status", status if isinstance(status, int) else None),
                ("effect_refs", _refs(a.get(EFFECT_REFS))),
                ("traceparent", s.traceparent), ("worker", a.get(WORKER)),
                ("retry_after_seconds", a.get(RETRY_AFTER)),
                ("error", " ".join(str(x) for x in (a.get(ERROR_TYPE), s.status_message) if x) or None),
                ("tool_error", True if a.get(ERROR_TYPE) == TOOL_ERROR else None)) if v is not None})
            resend = a.get(RESEND_COUNT)
            if previous is None and isinstance(resend, int) and resend > 0 and not a.get(RETRY_OF):
                problems.append(f"{where(s)}: {RESEND_COUNT}={resend} says it resends an earlier request, but it "
                                f"is the first attempt of {op_id} in the trace: the attempt it resends is missing")
            if previous is not None or a.get(RETRY_OF):
                record["retry_of_attempt_id"] = str(a.get(RETRY_OF) or previous["attempt_id"])  # type: ignore[index]
                if a.get(RETRY_OF) is None:
                    derived.append("retry_of_attempt_id")
                reason = a.get(RETRY_REASON)
                if reason is None and previous is not None:
                    reason = _retry_reason(previous)
                    derived.append("retry_reason")
                if reason is not None:
                    record["retry_reason"] = str(reason)
                if previous is not None and previous.get("request_fingerprint"):
                    record["prior_request_fingerprint"] = previous["request_fingerprint"]
                if a.get(RETRY_DECISION) is not None:
                    record["retry_decision"] = str(a[RETRY_DECISION])
            if a.get(BUDGET) is not None:
                record["attempt_budget_remaining"] = a[BUDGET]
            if derived:
                record["otel"]["derived"] = derived
            out.append((s.end, 1, record))
            previous = record

    for s in observations:
        op_id = trace.operation(s)
        if op_id is None:
            problems.append(f"{where(s)}: an observation span of no operation: give it, or a span above it, "
                            f"{OPERATION_ID}; it is not judged")
            continue
        a = s.attributes
        http = next((d for d in [s, *trace.descendants(s)] if d.attributes.get(HTTP_METHOD)), None)
        record = base(s, "observation", s.end, op_id)
        method = path = None
        if http is not None:
            method = str(http.attributes[HTTP_METHOD]).upper()
            url = str(http.attributes.get(URL_FULL) or http.attributes.get(URL_PATH) or "")
            path = urlsplit(url).path or url
        elif a.get(MCP_METHOD) or a.get(TOOL_NAME):
            method, path = "tools/call", str(a.get(TOOL_NAME) or s.name)
        status = http.attributes.get(HTTP_STATUS) if http is not None else None
        record.update({k: v for k, v in (
            ("observation_id", str(a.get(OBSERVATION_ID) or s.span_id)), ("source", str(a[OBSERVATION_SOURCE])),
            ("method", method), ("path", path), ("found", a.get(OBSERVATION_FOUND)),
            ("effect_refs", _refs(a.get(EFFECT_REFS))), ("lag_possible", a.get(LAG_POSSIBLE)),
            ("detail", f"HTTP {status}" if status is not None else None)) if v is not None})
        out.append((s.end, 2, record))

    for s in spans:
        for event in s.events:
            if event.name not in (RESOLUTION_EVENT, APPROVAL_EVENT):
                continue
            op_id = trace.operation(s)
            if op_id is None:
                problems.append(f"{where(s)}: a {event.name} event on a span of no operation: give the span "
                                f"{OPERATION_ID}; it is not judged")
                continue
            a = event.attributes
            if event.name == RESOLUTION_EVENT:
                record = base(s, "resolution", event.time, op_id, event.name)
                record.update({k: v for k, v in (
                    ("state", a.get(STATE)), ("effect_refs", _refs(a.get(EFFECT_REFS))),
                    ("evidence", _refs(a.get(EVIDENCE))), ("reason", a.get(REASON)),
                    ("correction_operation_id", a.get(CORRECTION_OPERATION))) if v is not None})
                out.append((event.time, 3, record))
            else:
                record = base(s, "approval", event.time, op_id, event.name)
                record.update({key.removeprefix("harness."): value for key, value in a.items()
                               if key.startswith("harness.")})
                out.append((event.time, 3, record))
    return out, problems


@collector_paused()  # a trace's spans are many long-lived objects: each full collection rescans them all
def read_trace(path: Path, name: str | None = None) -> DerivedLog:
    """The trace file as a derived log (module doc): problems first (H000 names them), then the events in log
    order, each validated as an audit-log line would be."""
    name = name or str(path)
    spans, unreadable = read_spans(path, name)
    derived, problems = derive_events(spans, name)
    log = DerivedLog(name, spans=len(spans))
    for _, message, text in unreadable:
        log.items.append((None, message, text))  # the text: H019 still searches it for secrets
    for message in problems:
        log.items.append((None, message, json.dumps({"problem": message})))
    derived.sort(key=lambda item: (item[0], item[1]))
    for _, _, record in derived:
        text = orjson.dumps(record).decode()
        parsed, error = parse_line(text)
        if parsed is None:
            span = record["otel"]
            error = (f"{name} line {span['line']}: span {span['span_id']} ({span['span']!r}) read as "
                     f"{record['event']}: {error}")
        log.items.append((parsed, error, text))
    return log


__all__ = ["RETRY_REASONS", "DerivedLog", "Span", "derive_events", "read_spans", "read_trace"]
