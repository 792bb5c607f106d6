"""The streamed, typed reading of a trace against the careful whole-file reading it replaced, on drawn traces:
the same spans, the same problems and the same derived log, whatever the order the spans come in (in order,
shuffled, out of order across lines), whatever shape their values take, malformed ones included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.events import parse_line
from harness.otel import reader
from harness.otel.reader import DerivedLog, Span, derive_events, read_spans, read_trace

SPAN_IDS = [f"{n:016x}" for n in range(1, 7)]
TRACES = ["5b8efff798038103d269b633813fc60c", "0af7651916cd43dd8448eb211c80319c"]


def careful_spans(path: Path, name: str) -> tuple[list[Span], list[tuple[int, str, str]]]:
    """The reading before it streamed: the whole text, every span through ``_span`` (no typed or fast path)."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    documents: list[tuple[int, str]]
    try:
        one = stripped.startswith("{") and "\n" in stripped.rstrip() and orjson.loads(stripped) is not None
    except orjson.JSONDecodeError:
        one = False
    if one:
        documents = [(text[: len(text) - len(stripped)].count("\n") + 1, text)]
    else:
        documents = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    spans: list[Span] = []
    problems: list[tuple[int, str, str]] = []
    fast = reader._fast_span
    reader._fast_span = lambda *args: None  # type: ignore[assignment]
    try:
        for number, chunk in documents:
            try:
                document = orjson.loads(chunk)
            except orjson.JSONDecodeError as exc:
                problems.append((number, f"{name} line {number}: not JSON ({exc}); expected one OTLP "
                                         "ExportTraceServiceRequest ({\"resourceSpans\": [...]}) a line", chunk))
                continue
            for item in reader._spans_of(document, number):
                if isinstance(item, str):
                    problems.append((number, f"{name} line {number}: {item}", chunk))
                else:
                    spans.append(item)
    finally:
        reader._fast_span = fast  # type: ignore[assignment]
    return spans, problems


def careful_trace(path: Path, name: str) -> DerivedLog:
    """``read_trace`` as it was: the careful spans, derived, sorted and each validated as a log line."""
    spans, unreadable = careful_spans(path, name)
    derived, problems = derive_events(spans, name)
    log = DerivedLog(name, spans=len(spans))
    log.items.extend((None, message, text) for _, message, text in unreadable)
    log.items.extend((None, message, json.dumps({"problem": message})) for message in problems)
    derived.sort(key=lambda item: (item[0], item[1]))
    for _, _, record in derived:
        text = orjson.dumps(record).decode()
        parsed, error = parse_line(text)
        if parsed is None:
            error = (f"{name} line {record['otel']['line']}: span {record['otel']['span_id']} "
                     f"({record['otel']['span']!r}) read as {record['event']}: {error}")
        log.items.append((parsed, error, text))
    return log


def any_value(draw: Any) -> Any:
    return draw(st.one_of(
        st.sampled_from(["POST", "op_1", "key_1", "tickets", "lookup", "ConnectTimeout", "tool_error", ""])
        .map(lambda v: {"stringValue": v}),
        st.integers(0, 600).map(lambda v: {"intValue": str(v)}),
        st.sampled_from([{"boolValue": True}, {"boolValue": False}, {"intValue": 3}, {"intValue": "-2"},
                         {"intValue": "²"}, {"intValue": "12a"}, {"intValue": "9" * 25}, {"doubleValue": 1.5},
                         {"stringValue": 7}, {},
                         {"stringValue": "a", "intValue": "1"}, {"bytesValue": "AAE="}, {"boolValue": 1},
                         {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}},
                         {"arrayValue": {"values": [{"stringValue": "tkt_1"}, {"stringValue": "tkt_2"}]}},
                         {"arrayValue": {"values": [{"stringValue": "x"}, {"doubleValue": 2.0}]}},
                         {"arrayValue": {}}, {"arrayValue": {"values": None}}, {"arrayValue": []}])))


KEYS = ["harness.operation.id", "gen_ai.tool.call.id", "harness.intent.id", "harness.destination",
        "http.request.method", "url.full", "http.response.status_code", "error.type", "harness.attempt.id",
        "harness.observation.source", "harness.observation.found", "harness.effect_refs", "mcp.method.name",
        "gen_ai.tool.name", "harness.retry.budget_remaining", "http.request.resend_count", "harness.idempotency_key"]


@st.composite
def attributes(draw: Any) -> list[Any]:
    pairs = [{"key": draw(st.sampled_from(KEYS)), "value": any_value(draw)} for _ in range(draw(st.integers(0, 5)))]
    if draw(st.integers(0, 19)) == 0:
        pairs.append(draw(st.sampled_from([{"value": {"stringValue": "x"}}, {"key": 1}, "kv", {"key": "k"}])))
    return pairs


def an_id(draw: Any, choices: list[str], size: int) -> Any:
    value = draw(st.sampled_from(choices))
    way = draw(st.integers(0, 11))
    if way == 0:
        return value.upper()
    if way == 1:
        import base64
        return base64.b64encode(bytes.fromhex(value)).decode()
    if way == 2:
        return draw(st.sampled_from(["xyz", 7, None, "", "0" * (2 * size - 1)]))
    return value


@st.composite
def span_document(draw: Any) -> dict[str, Any]:
    start = draw(st.integers(0, 50)) * 10**8 + 1_796_000_000_000_000_000
    doc: dict[str, Any] = {"traceId": an_id(draw, TRACES, 16), "spanId": an_id(draw, SPAN_IDS, 8),
                           "name": draw(st.sampled_from(["POST", "op", "execute_tool x", "lookup"])),
                           "kind": draw(st.sampled_from([1, 3, 0, "SPAN_KIND_CLIENT", 9, None])),
                           "startTimeUnixNano": str(start),
                           "endTimeUnixNano": str(start + draw(st.integers(0, 9)) * 10**7),
                           "attributes": draw(attributes())}
    if draw(st.booleans()):
        doc["parentSpanId"] = an_id(draw, SPAN_IDS, 8)
    for key, values in (("startTimeUnixNano", [5, "yesterday", -1, True, "1" * 25]), ("endTimeUnixNano", [None, 7]),
                        ("status", [{"code": 2, "message": "boom"}, {"code": "STATUS_CODE_ERROR"}, None, [],
                                    {"code": 9}]),
                        ("flags", [257, -1, True, None]), ("name", [None, 5])):
        if draw(st.integers(0, 7)) == 0:
            if key == "endTimeUnixNano" and draw(st.booleans()):
                del doc[key]
            else:
                doc[key] = draw(st.sampled_from(values))
    if draw(st.integers(0, 3)) == 0:
        doc["events"] = [{"name": draw(st.sampled_from(["harness.resolution", "harness.approval", "other"])),
                          "timeUnixNano": str(start + 5), "attributes": [
                              {"key": "harness.state", "value": {"stringValue": draw(
                                  st.sampled_from(["succeeded", "unknown", "done"]))}},
                              {"key": "harness.evidence", "value": {"arrayValue": {"values": [
                                  {"stringValue": SPAN_IDS[0]}]}}}]}]
    return doc


@st.composite
def trace_file(draw: Any) -> str:
    """The text of a trace file: spans in drawn order over lines of drawn sizes, now and then a bad line or the
    whole trace as one pretty-printed document."""
    spans = draw(st.lists(span_document(), max_size=12))
    lines, i = [], 0
    while i < len(spans):
        size = draw(st.integers(1, 4))
        scope: dict[str, Any] = {"spans": spans[i:i + size]}
        resource = {"attributes": [{"key": "service.instance.id", "value": {"stringValue": "ses_1"}}]}
        lines.append({"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]})
        i += size
    form = draw(st.integers(0, 9))
    if form == 0:
        return "\n\n" + json.dumps({"resourceSpans": [r for line in lines for r in line["resourceSpans"]]}, indent=2)
    texts = [json.dumps(line) for line in lines]
    if form == 1:
        texts.insert(draw(st.integers(0, len(texts))), draw(st.sampled_from(
            ["{not json", "[1]", '{"spans": []}', "   ", '{"resourceSpans": [5]}', "{\r}", "\u2028"])))
    return draw(st.sampled_from(["\n", "\r\n"])).join(texts) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=trace_file(), shuffle=st.randoms(use_true_random=False))
def test_the_streamed_typed_reading_is_the_careful_whole_file_reading(tmp_path: Path, text: str, shuffle: Any) -> None:
    path = tmp_path / "trace.jsonl"
    lines = text.splitlines()
    shuffle.shuffle(lines)  # the spans out of order, across lines
    for content in (text, "\n".join(lines)):
        path.write_bytes(content.encode())
        same(read_spans(path, "t"), careful_spans(path, "t"))
        same(read_trace(path, "t"), careful_trace(path, "t"))


def same(streamed: Any, careful: Any) -> None:
    """Equal, else the first difference (pytest's own diff of two large structures takes minutes)."""
    if streamed != careful:
        pairs = zip(streamed.items, careful.items, strict=False) if isinstance(streamed, DerivedLog) else \
            zip([*streamed[0], *streamed[1]], [*careful[0], *careful[1]], strict=False)
        raise AssertionError(next(((a, b) for a, b in pairs if a != b), (streamed, careful)))
