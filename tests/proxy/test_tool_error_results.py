"""The MCP tool error results the proxy answers in a tool's place (tool_error_after_commit, tool_error_result) are
valid on the wire the session speaks. mcp 2.x's modern sessions (protocol 2026-07-28) require every result to say
its ``resultType``: FastMCP 4's client (pydantic-ai's MCPToolset) refused a result without it ("CallToolResult.
resultType: Field required") and the agent saw a failed call where the wire held an answer. The handlers run on
test flows here; the bytes of the server's answer are those the fake MCP server wrote on mcp 2.3.0."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow

from harness.proxy import faults
from harness.proxy.rules import DEFAULT_TOOL_ERROR, FaultRule, RpcFacts

CALL = RpcFacts(method="tools/call", id=3, tool="create_order", arguments={"item": "sprocket"})
# the fake MCP server's answer on mcp 2.3.0 to a 2026-07-28 tools/call: its SDK adds resultType and _meta
SERVER_ANSWER = {"jsonrpc": "2.0", "id": 3, "result": {
    "content": [{"text": '{"id": "ord_0001"}', "type": "text"}], "isError": False,
    "structuredContent": {"id": "ord_0001"}, "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "retry-harness fake orders", "version": ""}}}}


def tool_call(protocol: str | None, answer: dict[str, Any] | None = None) -> http.HTTPFlow:
    flow = tflow.tflow(resp=answer is not None)
    if protocol is not None:
        flow.request.headers["mcp-protocol-version"] = protocol
    if answer is not None:
        assert flow.response is not None
        flow.response.headers["content-type"] = "application/json"
        flow.response.set_content(json.dumps(answer).encode())
    flow.metadata[faults.RPC_META] = CALL
    return flow


def result_sent(flow: http.HTTPFlow) -> dict[str, Any]:
    assert flow.response is not None and flow.response.status_code == 200
    doc = json.loads(flow.response.get_content() or b"")
    assert (doc["jsonrpc"], doc["id"]) == ("2.0", CALL.id)
    return dict(doc["result"])


def test_an_error_after_the_commit_is_the_server_s_own_result_with_the_error_in_its_place() -> None:
    flow = tool_call("2026-07-28", SERVER_ANSWER)
    rule = FaultRule(id="e", action="tool_error_after_commit")
    asyncio.run(faults.RESPONSE_HANDLERS["tool_error_after_commit"](flow, rule))
    assert result_sent(flow) == {"content": [{"type": "text", "text": DEFAULT_TOOL_ERROR}], "isError": True,
                                 "resultType": "complete", "_meta": SERVER_ANSWER["result"]["_meta"]}


def test_an_error_after_the_commit_on_the_older_wire_adds_nothing_the_server_did_not_write() -> None:
    older = {"jsonrpc": "2.0", "id": 3, "result": {"content": [], "structuredContent": {"id": "ord_0001"}}}
    flow = tool_call("2025-11-25", older)
    asyncio.run(faults.RESPONSE_HANDLERS["tool_error_after_commit"](
        flow, FaultRule(id="e", action="tool_error_after_commit", body="internal_error: it broke")))
    assert result_sent(flow) == {"content": [{"type": "text", "text": "internal_error: it broke"}], "isError": True}


def test_an_error_in_the_tool_s_place_says_its_result_type_on_the_modern_wire_only() -> None:
    rule = FaultRule(id="e", action="tool_error_result")
    for protocol, extra in (("2026-07-28", {"resultType": "complete"}), ("2025-11-25", {}), (None, {})):
        flow = tool_call(protocol)
        asyncio.run(faults.REQUEST_HANDLERS["tool_error_result"](flow, rule, None, "orders"))  # type: ignore[arg-type]
        assert result_sent(flow) == {"content": [{"type": "text", "text": DEFAULT_TOOL_ERROR}], "isError": True,
                                     **extra}, protocol
