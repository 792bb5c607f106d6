"""The fake MCP tool server end to end: a real `mcp` ClientSession (Streamable HTTP) calls tools on the
real destination process through the real fault proxy in reverse mode. Each test reads what the client
saw, the effect ledger and the proxy journal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from fake_destinations.host import DestinationHost
from fake_destinations.ledger import read_effects, read_requests
from harness.fingerprint import fingerprint
from harness.journal import read_journal
from harness.proxy.host import ProxyHost

ORDER = {"item": "disk", "quantity": 2, "client_reference": "op_1"}
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# every MCP destination these tests call, served by one process for the module
TOOL_SERVERS = {
    "orders": {"service": "mcp", "tools": {
        "create_order": {"effect": "order_created", "required": ["item", "quantity"], "idempotency": "argument",
                         "annotations": {"readOnlyHint": False, "idempotentHint": True}},
        "find_orders": {"lookup": "create_order", "annotations": {"readOnlyHint": True}},
        "ping": {"description": "answers, commits nothing"}}},
    "shipments": {"service": "mcp", "endpoint": "/tools", "tools": {
        "create_shipment": {"effect": "shipment_created", "idempotency": "natural_key"}}},
    "notices": {"service": "mcp", "tools": {"send_notice": {"effect": "notice_sent", "required": ["text"]}},
                "failures": [{"at": 1, "fault": "error_after_commit"}, {"at": 2, "fault": "error_before_commit"}]},
}
CALL_LIMIT = 20.0  # seconds: a call that hangs fails its test instead of the run


@pytest.fixture(scope="module")
def tool_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DestinationHost]:
    folder = tmp_path_factory.mktemp("mcp")
    host = DestinationHost(TOOL_SERVERS, folder / "ledger.sqlite", log_path=folder / "destinations.log")
    try:
        host.start()
        yield host
    finally:
        host.stop()


class Wire:
    """The proxy in front of the tool servers for one test, and what each side recorded."""

    def __init__(self, proxy: ProxyHost, host: DestinationHost, journal: Path) -> None:
        self.proxy, self.host, self.journal_path = proxy, host, journal
        self.urls: dict[str, str] = {}

    def configure(self, rules: list[dict[str, Any]] = ()) -> Wire:  # type: ignore[assignment]
        self.urls = self.proxy.configure(self.host.urls, list(rules), self.journal_path).urls
        return self

    def call(self, tool: str, arguments: dict[str, Any], *, destination: str = "orders", endpoint: str = "/mcp",
             read_timeout: float = 5.0, meta: dict[str, Any] | None = None) -> CallToolResult | BaseException:
        """One tool call in its own client session, as an agent that reconnects makes it: the result, or
        what the client raised."""
        return asyncio.run(call_tool(self.urls[destination] + endpoint, tool, arguments, read_timeout=read_timeout,
                                     meta=meta))

    def journal(self) -> list[dict[str, Any]]:
        self.proxy.finish()
        return read_journal(self.journal_path)

    def tool_calls(self) -> list[dict[str, Any]]:
        return [e for e in self.journal() if (e["rpc"] or {}).get("method") == "tools/call"]

    def ledger(self) -> list[dict[str, Any]]:
        return read_requests(self.host.ledger_path)

    def effects(self) -> list[dict[str, Any]]:
        return read_effects(self.host.ledger_path)


async def call_tool(url: str, tool: str, arguments: dict[str, Any], *, read_timeout: float,
                    meta: dict[str, Any] | None) -> CallToolResult | BaseException:
    async def session() -> CallToolResult:
        async with httpx.AsyncClient(timeout=5) as http, \
                streamable_http_client(url, http_client=http) as (read, write, _), ClientSession(read, write) as client:
            await client.initialize()
            return await client.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=read_timeout),
                                          meta=meta)
    try:
        return await asyncio.wait_for(session(), CALL_LIMIT)
    except TimeoutError:
        raise
    except BaseException as exc:  # noqa: BLE001 - what the client raised is the test's subject
        return exc


@pytest.fixture
def wire(tool_servers: DestinationHost, tmp_path: Path) -> Iterator[Wire]:
    tool_servers.reset()
    proxy = ProxyHost.shared()
    try:
        yield Wire(proxy, tool_servers, tmp_path / "journal.ndjson")
    finally:
        proxy.finish()


def structured(result: CallToolResult | BaseException) -> dict[str, Any]:
    assert isinstance(result, CallToolResult), result
    assert not result.isError, result.content
    assert result.structuredContent is not None
    assert json.loads(result.content[0].text) == result.structuredContent  # type: ignore[union-attr]
    return result.structuredContent


def error_text(result: CallToolResult | BaseException) -> str:
    assert isinstance(result, CallToolResult) and result.isError, result
    return result.content[0].text  # type: ignore[union-attr]


def test_a_tool_call_through_the_proxy_is_one_ledger_row_and_one_journal_entry(wire: Wire) -> None:
    arguments = {**ORDER, "idempotency_key": "key_1"}
    order = structured(wire.configure().call("create_order", arguments, meta={"traceparent": TRACEPARENT}))
    assert order == {**arguments, "id": "ord_0001", "status": "created"}
    journal, ledger = wire.journal(), wire.ledger()
    # every JSON-RPC message is a flow and a ledger row, tied by the flow id the proxy stamped
    assert [row["flow_id"] for row in ledger] == [entry["flow_id"] for entry in journal]
    assert [row["method"] for row in ledger] == [entry["rpc"]["method"] for entry in journal] == \
        ["initialize", "notifications/initialized", "tools/call", "tools/list"]  # the client lists to validate
    assert {(e["method"], e["path"]) for e in journal} == {("POST", "/mcp")}  # HTTP truth stays HTTP
    (call,) = [e for e in journal if e["rpc"]["method"] == "tools/call"]
    (row,) = [r for r in ledger if r["method"] == "tools/call"]
    assert call["rpc"] == {"method": "tools/call", "id": 1, "tool": "create_order", "is_error": False}
    assert (call["idempotency_key"], call["body_fingerprint"], call["traceparent"]) == \
        ("key_1", fingerprint(arguments), TRACEPARENT)
    assert (row["path"], row["kind"], json.loads(row["params"]), row["outcome"], row["status"]) == \
        ("create_order", "create_order", arguments, "committed", 200)
    assert (row["idempotency_key"], row["client_reference"], row["payload_fingerprint"], row["traceparent"]) == \
        ("key_1", "op_1", call["body_fingerprint"], TRACEPARENT)
    (effect,) = wire.effects()
    assert (effect["kind"], effect["effect_ref"], effect["operation_key"], effect["flow_id"]) == \
        ("order_created", "ord_0001", "key_1", call["flow_id"])
    assert json.loads(effect["committed_params"]) == arguments
    protocol = [r for r in ledger if r["method"] != "tools/call"]
    assert {(r["path"], r["outcome"], r["kind"]) for r in protocol} == {("/mcp", "read", None)}
    assert [r["status"] for r in protocol] == [200, 202, 200]
