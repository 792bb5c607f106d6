"""The OTLP reader on hand-made documents: the mapping of docs/otel.md, and bad input named precisely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.audit.otlp import load_trace_log
from harness.checker import check
from harness.errors import EvidenceError
from harness.otel.reader import read_trace
from tests.otel.documents import OP, TRACE, URL, event, request, response_lost, span, write


def events(path: Path) -> list[dict]:
    log = read_trace(path)
    assert [error for _, error, _ in log.items if error] == []
    return [record for record, _, _ in log.items if record is not None]


def test_the_spans_of_a_lost_response_are_the_events_of_the_audit_log(tmp_path: Path) -> None:
    read = events(write(tmp_path / "trace.jsonl", response_lost()))
    assert [e["event"] for e in read] == ["operation", "attempt", "observation", "resolution"]
    operation, attempt, observation, resolution = read
    assert operation["operation_id"] == "op_1" and operation["intent_id"] == "printer-on-fire"
    assert operation["intent"] == {"kind": "create_ticket", "destination": "tickets"}
    assert operation["session_id"] == "ses_agent1"  # the resource's service.instance.id
    assert attempt["attempt_id"] == "00000000000000a1" and attempt["dispatch_state"] == "sent_no_response"
    assert (attempt["method"], attempt["path"], attempt["idempotency_key"]) == ("POST", "/tickets", "key_1")
    assert attempt["destination"] == "tickets"  # from its operation
    assert attempt["traceparent"] == f"00-{TRACE}-00000000000000a1-01"  # what the agent propagated
    assert attempt["otel"]["derived"] == ["dispatch_state"]  # read from error.type, not given
    assert observation["found"] is True and observation["effect_refs"] == ["tkt_0001"]
    assert (observation["method"], observation["path"]) == ("GET", "/tickets")
    assert resolution["state"] == "succeeded" and resolution["evidence"] == ["00000000000000b1"]
    assert resolution["otel"]["event"] == "harness.resolution"
    verdict = check(load_trace_log(tmp_path / "trace.jsonl"), offline=True)
    assert verdict.passed and verdict.operations[0].state == "succeeded"


def test_base64_ids_and_one_pretty_printed_document_read_the_same(tmp_path: Path) -> None:
    hex_events = events(write(tmp_path / "hex.jsonl", response_lost()))
    b64_events = events(write(tmp_path / "b64.jsonl", response_lost(base64_ids=True)))
    assert b64_events == hex_events
    whole = response_lost()
    merged = {"resourceSpans": whole[0]["resourceSpans"] + whole[1]["resourceSpans"]}
    (tmp_path / "one.json").write_text(json.dumps(merged, indent=2), encoding="utf-8")
    assert [(e["event"], e["ts"]) for e in events(tmp_path / "one.json")] == [(e["event"], e["ts"]) for e in hex_events]


def test_a_retry_is_linked_to_the_attempt_before_it_and_its_reason_read_from_that_outcome(tmp_path: Path) -> None:
    first = span("00000000000000a1", "POST", 0.1, 0.2, {"http.request.method": "POST", "url.full": URL,
                                                         "http.response.status_code": 429}, parent="00000000000000f0")
    second = span("00000000000000a2", "POST", 1.3, 1.4, {"http.request.method": "POST", "url.full": URL,
                                                          "http.response.status_code": 201,
                                                          "http.request.resend_count": 1}, parent="00000000000000f0")
    operation = span("00000000000000f0", "op", 0.0, 2.0, OP, kind=1)
    _, retried, retry = events(write(tmp_path / "t.jsonl", [request(first, second, operation)]))
    assert retried["dispatch_state"] == "response_received" and retried["http_status"] == 429
    assert retry["retry_of_attempt_id"] == "00000000000000a1" and retry["retry_reason"] == "rate_limited"
    assert retry["attempt_number"] == 2
    assert retry["otel"]["derived"] == ["dispatch_state", "retry_of_attempt_id", "retry_reason"]
    # what a span lacks and no outcome can tell stays missing: the rule says so (H009: no budget stated)
    verdict = check(load_trace_log(tmp_path / "t.jsonl"), offline=True)
    assert "H009" in verdict.codes


def test_a_connection_never_made_is_not_sent(tmp_path: Path) -> None:
    refused = span("00000000000000a1", "POST", 0.1, 0.2, {"http.request.method": "POST", "url.full": URL,
                                                           "error.type": "requests.exceptions.ConnectTimeout"},
                   parent="00000000000000f0", status=2)
    operation = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1)
    _, attempt = events(write(tmp_path / "t.jsonl", [request(refused, operation)]))
    assert attempt["dispatch_state"] == "not_sent"
    assert attempt["error"] == "requests.exceptions.ConnectTimeout"


def test_an_mcp_tool_call_keeps_its_tool_call_id_as_the_operation(tmp_path: Path) -> None:
    tool = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "create_order", "gen_ai.tool.call.id": "call_7"}
    failed = span("00000000000000a1", "tools/call create_order", 0.1, 0.2, {**tool, "error.type": "tool_error"})
    again = span("00000000000000a2", "tools/call create_order", 0.3, 0.4, tool)
    operation, first, second = events(write(tmp_path / "t.jsonl", [request(failed, again)]))
    assert operation["operation_id"] == first["operation_id"] == second["operation_id"] == "call_7"
    assert operation["intent"] == {"kind": "create_order"}
    assert (first["method"], first["path"], first["http_status"]) == ("tools/call", "create_order", 200)
    assert first["tool_error"] is True and first["dispatch_state"] == "response_received"
    assert second["retry_of_attempt_id"] == "00000000000000a1"


def test_the_innermost_client_span_is_the_attempt(tmp_path: Path) -> None:
    # requests' span around urllib3's: the inner one is what went on the wire
    outer = span("00000000000000a1", "POST", 0.1, 0.5, {"http.request.method": "POST", "url.full": URL,
                                                         "http.response.status_code": 201}, parent="00000000000000f0")
    inner = span("00000000000000a2", "POST", 0.2, 0.4, {"http.request.method": "POST", "url.full": URL,
                                                         "http.response.status_code": 201}, parent="00000000000000a1")
    operation = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1)
    attempts = [e for e in events(write(tmp_path / "t.jsonl", [request(outer, inner, operation)]))
                if e["event"] == "attempt"]
    assert [a["attempt_id"] for a in attempts] == ["00000000000000a2"]


def test_a_tool_call_id_under_an_operation_span_is_that_operation_not_one_of_its_own(tmp_path: Path) -> None:
    # a framework's tool span (pydantic-ai's "running tool") inside the agent's operation scope
    tool = span("00000000000000c1", "running tool", 0.05, 0.9, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_ticket",
        "gen_ai.tool.call.id": "call_1"}, parent="00000000000000f0")
    post = span("00000000000000a1", "POST", 0.1, 0.5, {"http.request.method": "POST", "url.full": URL,
                                                        "http.response.status_code": 201}, parent="00000000000000c1")
    operation = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1)
    records = events(write(tmp_path / "t.jsonl", [request(tool, post, operation)]))
    assert {r["operation_id"] for r in records} == {"op_1"}
    assert [r["event"] for r in records].count("operation") == 1


def test_a_tool_span_holding_only_a_lookup_is_no_attempt(tmp_path: Path) -> None:
    # the framework ran the tool again and the tool only looked up (the retry an unknown result needs)
    tool = span("00000000000000c2", "running tool", 0.05, 0.9, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_ticket"}, parent="00000000000000f0")
    lookup = span("00000000000000b1", "lookup", 0.1, 0.2, {
        "harness.observation.source": "lookup", "http.request.method": "GET", "url.full": URL,
        "http.response.status_code": 200, "harness.observation.found": False}, parent="00000000000000c2")
    operation = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1)
    records = events(write(tmp_path / "t.jsonl", [request(tool, lookup, operation)]))
    assert [r["event"] for r in records if r["event"] != "operation"] == ["observation"]


def problems(path: Path) -> list[str]:
    return [error for record, error, _ in read_trace(path).items if record is None and error]


def test_a_line_that_is_not_otlp_json_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [*response_lost(), "{not json", json.dumps({"spans": []}), "[1]"])
    found = problems(path)
    assert found[0].startswith(f"{path} line 3: not JSON (")
    assert found[1] == (f"{path} line 4: expected an OTLP trace document {{\"resourceSpans\": [...]}}, "
                        "got keys spans")
    assert found[2].startswith(f"{path} line 5: expected an OTLP trace document")
    verdict = check(load_trace_log(path), offline=True)
    assert [f.code for f in verdict.findings] == ["H000", "H000", "H000"]
    assert f"{path} (read as events):1: {path} line 3: not JSON" in verdict.findings[0].message
    assert verdict.operations[0].state == "succeeded"  # the readable lines are still judged


def test_a_bad_id_or_time_names_its_key_path_and_value(tmp_path: Path) -> None:
    bad_id = span("00000000000000a1", "POST", 0.1, 0.2, {})
    bad_id["spanId"] = "xyz"
    bad_time = span("00000000000000a2", "POST", 0.1, 0.2, {})
    bad_time["startTimeUnixNano"] = "yesterday"
    bad_value = span("00000000000000a3", "POST", 0.1, 0.2, {})
    bad_value["attributes"] = [{"key": "http.request.method", "value": {"stringValue": 7}}]
    too_big = span("00000000000000a4", "POST", 0.1, 0.2, {})
    too_big["attributes"] = [{"key": "http.request.resend_count", "value": {"intValue": "9" * 25}}]
    found = problems(write(tmp_path / "t.jsonl", [request(bad_id, bad_time, bad_value, too_big)]))
    where = "resourceSpans[0].scopeSpans[0].spans"
    assert found == [
        f"{tmp_path / 't.jsonl'} line 1: {where}[0].spanId: 'xyz' is neither 16 hex digits nor the base64 of 8 bytes",
        f"{tmp_path / 't.jsonl'} line 1: {where}[1].startTimeUnixNano: 'yesterday' is not unix nanoseconds "
        "(a decimal integer)",
        f"{tmp_path / 't.jsonl'} line 1: {where}[2].attributes[0].value: stringValue 7 is not a value OTLP JSON allows "
        "(stringValue, boolValue, intValue, doubleValue, arrayValue, kvlistValue, bytesValue)",
        f"{tmp_path / 't.jsonl'} line 1: {where}[3].attributes[0].value: intValue \"{'9' * 25}\" is beyond a 64-bit "
        "integer"]


def test_what_a_span_lacks_for_the_mapping_is_said_never_passed_over(tmp_path: Path) -> None:
    orphan = span("00000000000000a1", "POST", 0.1, 0.2, {"http.request.method": "POST", "url.full": URL,
                                                          "http.response.status_code": 201})
    silent = span("00000000000000a2", "POST", 0.3, 0.4, {"http.request.method": "POST", "url.full": URL},
                  parent="00000000000000f0")
    resent = span("00000000000000a3", "POST", 0.5, 0.6, {"http.request.method": "POST", "url.full": URL,
                                                          "http.response.status_code": 201,
                                                          "http.request.resend_count": 2}, parent="00000000000000f1")
    op1 = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1)
    op2 = span("00000000000000f1", "op", 0.0, 1.0, {**OP, "harness.operation.id": "op_2"}, kind=1)
    path = write(tmp_path / "t.jsonl", [request(orphan, silent, resent, op1, op2)])
    found = problems(path)
    assert found == [
        f"{path} line 1: span 00000000000000a1 ('POST', trace {TRACE}): an attempt span of no operation: give it, or "
        "a span above it, harness.operation.id (or gen_ai.tool.call.id); it is not judged",
        f"{path} line 1: span 00000000000000a2 ('POST', trace {TRACE}): an attempt of op_1 that carries neither "
        "http.response.status_code nor error.type (nor harness.dispatch_state) and ended without an error status: "
        "whether it was answered is unknown; it is not judged",
        f"{path} line 1: span 00000000000000a3 ('POST', trace {TRACE}): http.request.resend_count=2 says it resends "
        "an earlier request, but it is the first attempt of op_2 in the trace: the attempt it resends is missing"]
    assert check(load_trace_log(path), offline=True).by_code("H000")


def test_a_secret_in_any_attribute_is_found(tmp_path: Path) -> None:
    documents = response_lost()
    attempt = documents[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    header = {"arrayValue": {"values": [{"stringValue": "Bearer sk_live_0123456789abcdef"}]}}
    attempt["attributes"].append({"key": "http.request.header.authorization", "value": header})
    verdict = check(load_trace_log(write(tmp_path / "t.jsonl", documents)), offline=True)
    assert verdict.codes == {"H019"}


def test_a_resolution_event_with_a_state_outside_the_schema_is_h000(tmp_path: Path) -> None:
    operation = span("00000000000000f0", "op", 0.0, 1.0, OP, kind=1,
                     events=[event("harness.resolution", 0.5, {"harness.state": "done"})])
    path = write(tmp_path / "t.jsonl", [request(operation)])
    (message,) = problems(path)
    assert message.startswith(f"{path} line 1: span 00000000000000f0 ('op') read as resolution: ")
    assert "done" in message


def test_a_span_that_is_its_own_ancestor_is_read_not_walked_forever(tmp_path: Path) -> None:
    looped = span("00000000000000a1", "POST", 0.1, 0.2, {"http.request.method": "POST", "url.full": URL,
                                                         "harness.observation.source": "lookup"},
                  parent="00000000000000a1")
    other = span("00000000000000a2", "op", 0.0, 1.0, OP, kind=1, parent="00000000000000a3")
    above = span("00000000000000a3", "op", 0.0, 1.0, OP, kind=1, parent="00000000000000a2")
    log = read_trace(write(tmp_path / "t.jsonl", [request(looped, other, above)]))
    assert log.spans == 3


def test_a_file_that_cannot_be_read_is_an_evidence_error(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="cannot read the trace"):
        read_trace(tmp_path / "missing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"resourceSpans": []}\n\xff\n')
    with pytest.raises(EvidenceError, match="not UTF-8 text at byte 22"):
        read_trace(tmp_path / "latin1.jsonl")
