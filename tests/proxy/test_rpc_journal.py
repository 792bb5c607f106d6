"""The journal's `rpc` of a JSON-RPC flow: `is_error` read from the answer the client received, whether
the server answered JSON or an SSE stream (Streamable HTTP allows both; the fake answers JSON)."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http

from harness.proxy.addon import rpc_entry
from harness.proxy.rules import RpcFacts

CALL = RpcFacts(method="tools/call", id=4, tool="create_order", arguments={})


def answer(result: dict[str, object], rid: object = 4) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def json_response(doc: object) -> http.Response:
    return http.Response.make(200, json.dumps(doc).encode(), {"content-type": "application/json"})


def sse_response(*docs: object) -> http.Response:
    body = "".join(f"event: message\ndata: {json.dumps(doc)}\n\n" for doc in docs)
    return http.Response.make(200, body.encode(), {"content-type": "text/event-stream"})


@pytest.mark.parametrize("response, is_error", [
    (json_response(answer({"content": [], "isError": True})), True),
    (json_response(answer({"content": []})), False),
    (json_response({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "bad"}}), None),
    (json_response(answer({"isError": True}, rid=5)), None),  # the answer to another request
    (sse_response({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
                  answer({"content": [], "isError": True})), True),
    (http.Response.make(200, b"not json", {"content-type": "application/json"}), None),
    (http.Response.make(502, b"<html>", {"content-type": "text/html"}), None),
])
def test_is_error_is_the_tool_result_the_client_received(response: http.Response, is_error: bool | None) -> None:
    assert rpc_entry(CALL, response, "response") == {"method": "tools/call", "id": 4, "tool": "create_order",
                                                      "is_error": is_error}


def test_no_answer_no_other_method_and_no_json_rpc_say_null() -> None:
    assert rpc_entry(CALL, None, "connection_closed")["is_error"] is None  # type: ignore[index]
    listing = RpcFacts(method="tools/list", id=2)
    assert rpc_entry(listing, json_response(answer({"tools": []}, rid=2)), "response") == \
        {"method": "tools/list", "id": 2, "tool": None, "is_error": None}
    assert rpc_entry(None, json_response({}), "response") is None
