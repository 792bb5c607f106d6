"""JSON-RPC awareness of the fault rules, pure (no network): what a tools/call's facts are, how
`match.tool` selects it and counts, and that a body that is no JSON is never parsed for it. The same
rules on real MCP traffic: tests/fake_destinations/test_mcp.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from harness.fingerprint import fingerprint, fingerprint_body
from harness.proxy.rules import FaultRule, Match, RequestFacts, RpcFacts, RuleBook, matches_criteria

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def rpc_request(method: str = "tools/call", *, rid: Any = 7, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> RequestFacts:
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}).encode()
    return RequestFacts("orders", "POST", "/mcp", {"content-type": "application/json", **(headers or {})}, body,
                        fingerprint_body(body))


def tool_call(tool: str = "create_order", arguments: dict[str, Any] | None = None, **kw: Any) -> RequestFacts:
    meta = kw.pop("meta", None)
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    return rpc_request(params=params, **kw)


def test_a_tool_call_s_facts_are_its_method_id_tool_arguments_and_meta() -> None:
    facts = tool_call(arguments={"item": "disk"}, meta={"progressToken": 1})
    assert facts.rpc == RpcFacts(method="tools/call", id=7, tool="create_order", arguments={"item": "disk"},
                                 meta={"progressToken": 1})
    assert rpc_request("tools/list", rid="a").rpc == RpcFacts(method="tools/list", id="a")
    assert rpc_request("notifications/initialized", rid=None).rpc == RpcFacts(method="notifications/initialized")


@pytest.mark.parametrize("headers, body", [
    ({"content-type": "application/json"}, b'{"title": "disk full"}'),               # JSON, not JSON-RPC
    ({"content-type": "application/json"}, b'[{"jsonrpc": "2.0", "method": "x"}]'),  # a batch: not one request
    ({"content-type": "application/x-www-form-urlencoded"}, b"jsonrpc=2.0&method=tools/call"),
    ({"content-type": "text/plain"}, b'{"jsonrpc": "2.0", "method": "tools/call"}'),
    ({}, b""),
])
def test_anything_else_has_no_rpc_facts(headers: dict[str, str], body: bytes) -> None:
    assert RequestFacts("orders", "POST", "/mcp", headers, body).rpc is None


def test_a_body_that_is_no_json_object_is_never_parsed_for_them() -> None:
    facts = RequestFacts("orders", "POST", "/upload", {"content-type": "application/octet-stream"}, b"\x00" * 64)
    assert facts.rpc is None
    assert "json_body" not in facts.__dict__  # the cached parse never ran


def test_a_tool_call_s_key_is_an_argument_or_its_meta_and_its_fingerprint_the_arguments() -> None:
    arguments = {"item": "disk", "idempotency_key": "key_1"}
    facts = tool_call(arguments=arguments)
    assert facts.idempotency_key == "key_1"
    assert facts.body_fingerprint == fingerprint(arguments)  # as the agent and the ledger fingerprint a call
    assert facts.body_fingerprint != facts.fingerprint  # the envelope's id changes per attempt; the arguments not
    assert tool_call(arguments={"idempotencyKey": "k"}).idempotency_key == "k"
    assert tool_call(arguments={"item": "disk"}, meta={"idempotencyKey": "from_meta"}).idempotency_key == "from_meta"
    assert tool_call(arguments={"item": "disk"}).idempotency_key is None
    # a JSON-RPC message that is no tool call keeps the body's fingerprint
    listing = rpc_request("tools/list")
    assert listing.body_fingerprint == listing.fingerprint


def test_the_traceparent_is_the_header_else_the_call_s_meta() -> None:
    assert tool_call(meta={"traceparent": TRACEPARENT}).traceparent == TRACEPARENT
    assert tool_call(meta={"traceparent": TRACEPARENT}, headers={"traceparent": "00-h"}).traceparent == "00-h"
    assert tool_call().traceparent is None


def test_match_tool_selects_the_tools_call_of_that_tool() -> None:
    match = Match(tool="create_order")
    assert matches_criteria(match, tool_call("create_order"))
    assert not matches_criteria(match, tool_call("find_orders"))
    assert not matches_criteria(match, rpc_request("tools/list"))
    body = b'{"name": "create_order"}'
    assert not matches_criteria(match, RequestFacts("orders", "POST", "/mcp", {}, body))
    get = RequestFacts("orders", "GET", "/mcp", {"content-type": "application/json"}, tool_call().body)
    assert not matches_criteria(match, get)


def test_a_tool_rule_counts_only_the_calls_of_its_tool() -> None:
    book = RuleBook([FaultRule(id="second_create", action="tool_error_result",
                               match=Match(tool="create_order", nth=2))])
    fired = [book.decide(facts) for facts in (rpc_request("initialize"), tool_call("find_orders"),
                                              tool_call("create_order"), rpc_request("tools/list"),
                                              tool_call("create_order"), tool_call("create_order"))]
    assert [rule.id if rule else None for rule in fired] == [None, None, None, None, "second_create", None]


def test_per_fingerprint_counts_a_call_s_arguments_whatever_its_json_rpc_id() -> None:
    book = RuleBook([FaultRule(id="first_of_each", action="drop_response_after_commit",
                               match=Match(tool="create_order", per="fingerprint", nth=1))])
    same = {"item": "disk"}
    decided = [book.decide(tool_call(arguments=same, rid=n)) for n in (1, 2)]
    assert [rule is not None for rule in decided] == [True, False]


def test_match_tool_with_another_method_is_refused() -> None:
    with pytest.raises(ValidationError, match="match.tool is a tools/call, which an MCP client POSTs; method 'GET'"):
        Match(tool="create_order", method="GET")
    with pytest.raises(ValidationError, match="tool must name a tool"):
        Match(tool="")
    assert Match(tool="create_order", method="post").method == "POST"
