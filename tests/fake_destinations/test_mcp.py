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
import yaml
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult

from fake_destinations.host import DestinationHost, DestinationPool
from fake_destinations.ledger import read_effects, read_requests
from fake_destinations.spec import DestinationSpec, describe
from harness.contract import DestinationContract
from harness.errors import ScenarioError
from harness.fingerprint import fingerprint
from harness.journal import read_journal
from harness.proxy.host import ProxyHost
from harness.scenario import load

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
    "limited": {"service": "mcp", "tools": {"book_slot": {"effect": "slot_booked"}},
                "rate_limit": {"max_requests": 1, "per_seconds": 3600, "retry_after_seconds": 7}},
    # its annotation says a second call does nothing more; each call commits (scenario mcp_annotation_contradicted)
    "alerts": {"service": "mcp", "tools": {
        "raise_alert": {"effect": "alert_raised", "annotations": {"idempotentHint": True}}}},
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
        return self.session([(tool, arguments)], destination=destination, endpoint=endpoint,
                            read_timeout=read_timeout, meta=meta)[0]

    def session(self, calls: list[tuple[str, dict[str, Any]]], *, destination: str = "orders",
                endpoint: str = "/mcp", read_timeout: float = 5.0,
                meta: dict[str, Any] | None = None) -> list[CallToolResult | BaseException]:
        """Tool calls one after the other in one client session: what each returned or raised (a failure of
        the session itself ends it: the last item is what left it)."""
        return asyncio.run(call_tools(self.urls[destination] + endpoint, calls, read_timeout=read_timeout,
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


async def call_tools(url: str, calls: list[tuple[str, dict[str, Any]]], *, read_timeout: float,
                     meta: dict[str, Any] | None) -> list[CallToolResult | BaseException]:
    outcomes: list[CallToolResult | BaseException] = []

    async def session() -> None:
        async with httpx.AsyncClient(timeout=5) as http, \
                streamable_http_client(url, http_client=http) as (read, write, _), ClientSession(read, write) as client:
            await client.initialize()
            for tool, arguments in calls:
                try:
                    outcomes.append(await client.call_tool(
                        tool, arguments, read_timeout_seconds=timedelta(seconds=read_timeout), meta=meta))
                except Exception as exc:  # what call_tool raised, the session still open
                    outcomes.append(exc)
    try:
        await asyncio.wait_for(session(), CALL_LIMIT)
    except TimeoutError:
        raise
    except BaseException as exc:  # what left the client session: the transport's failure
        outcomes.append(exc)
    return outcomes


async def call_tool(url: str, tool: str, arguments: dict[str, Any], *, read_timeout: float = 5.0,
                    meta: dict[str, Any] | None = None) -> CallToolResult | BaseException:
    return (await call_tools(url, [(tool, arguments)], read_timeout=read_timeout, meta=meta))[0]


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


# -- what the client sees under each fault on a tools/call ----------------------------------------------

LOSE = {"id": "lose_first_call", "action": "drop_response_after_commit", "match": {"tool": "create_order", "nth": 1}}


def test_a_lost_result_raises_out_of_the_client_session_and_the_effect_stands(wire: Wire) -> None:
    """drop_response_after_commit: the mcp client does not hang until read_timeout_seconds. Its transport's
    POST task fails (httpx.RemoteProtocolError), which ends the client's task group: call_tool is cancelled
    and ``streamable_http_client`` raises an ExceptionGroup holding it. The session is gone; an agent
    retries in a new one, and the same key returns the first result."""
    arguments = {**ORDER, "idempotency_key": "key_1"}
    lost = wire.configure([LOSE]).call("create_order", arguments, read_timeout=CALL_LIMIT)
    assert isinstance(lost, BaseExceptionGroup), lost
    assert [type(e) for e in lost.exceptions] == [httpx.RemoteProtocolError]
    retry = structured(wire.call("create_order", arguments))
    assert retry["id"] == "ord_0001"
    first, second = wire.tool_calls()
    assert (first["fault"], first["forwarded"], first["upstream_status"], first["client_outcome"]) == \
        ("drop_response_after_commit", True, 200, "connection_closed")
    assert first["rpc"] == {"method": "tools/call", "id": 1, "tool": "create_order", "is_error": None}
    assert second["rpc"]["is_error"] is False and second["fault"] is None
    (effect,) = wire.effects()
    assert effect["flow_id"] == first["flow_id"]
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [(r["outcome"], r["effect_ref"], r["flow_id"]) for r in rows] == \
        [("committed", "ord_0001", first["flow_id"]), ("replayed", "ord_0001", second["flow_id"])]


@pytest.mark.parametrize("rule, raised, effects", [
    ({"action": "reset_after_commit"}, httpx.ReadError, 1),
    ({"action": "replace_status", "status": 502}, httpx.HTTPStatusError, 1),
    ({"action": "synthetic_status", "status": 503}, httpx.HTTPStatusError, 0),
    ({"action": "drop_request"}, httpx.RemoteProtocolError, 0),
])
def test_other_transport_faults_end_the_client_session_too(wire: Wire, rule: dict[str, Any], raised: type,
                                                             effects: int) -> None:
    wire.configure([{"id": "fault", **rule, "match": {"tool": "create_order", "nth": 1}}])
    ended = wire.call("create_order", ORDER, read_timeout=CALL_LIMIT)
    assert isinstance(ended, BaseExceptionGroup), ended
    assert [type(e) for e in ended.exceptions] == [raised]
    assert len(wire.effects()) == effects


def test_a_held_result_is_a_timeout_of_call_tool_and_the_session_lives_on(wire: Wire) -> None:
    """hold_response past read_timeout_seconds: call_tool raises McpError (a request timeout, code 408);
    without read_timeout_seconds it would wait as long as the transport's read timeout (300 s by default)."""
    wire.configure([{"id": "slow", "action": "hold_response", "hold_ms": 10000,
                     "match": {"tool": "create_order", "nth": 1}}])
    call = {**ORDER, "idempotency_key": "key_1"}
    held, retried = wire.session([("create_order", call), ("create_order", call)], read_timeout=0.5)
    assert isinstance(held, McpError) and "Timed out" in str(held), held
    assert structured(retried)["id"] == "ord_0001"  # the same session, the same key: the first result
    first, second = sorted(wire.tool_calls(), key=lambda e: e["ts_request"])  # journaled as each ended
    assert (first["fault"], first["forwarded"], first["rpc"]["is_error"]) == ("hold_response", True, None)
    # the client gave up on the call, not on its HTTP request: that one closes when the session ends
    assert first["client_outcome"] == "timeout"
    assert (second["rpc"]["id"], second["rpc"]["is_error"]) == (2, False)
    assert [e["effect_ref"] for e in wire.effects()] == ["ord_0001"]  # committed while the client waited


def test_a_tool_error_result_is_answered_by_the_proxy_and_nothing_is_committed(wire: Wire) -> None:
    wire.configure([{"id": "refuse", "action": "tool_error_result", "body": "unavailable: try later",
                     "match": {"tool": "create_order", "nth": 1}}])
    assert error_text(wire.call("create_order", {**ORDER, "idempotency_key": "key_1"})) == "unavailable: try later"
    structured(wire.call("create_order", {**ORDER, "idempotency_key": "key_1"}))
    first, second = wire.tool_calls()
    assert (first["fault"], first["forwarded"], first["client_status"], first["rpc"]) == \
        ("tool_error_result", False, 200, {"method": "tools/call", "id": 1, "tool": "create_order", "is_error": True})
    assert first["flow_id"] not in {r["flow_id"] for r in wire.ledger()}  # it never reached the server
    assert [e["flow_id"] for e in wire.effects()] == [second["flow_id"]]


def test_a_tool_error_after_commit_hides_a_committed_effect(wire: Wire) -> None:
    wire.configure([{"id": "fail_after", "action": "tool_error_after_commit",
                     "match": {"tool": "create_order", "nth": 1}}])
    assert error_text(wire.call("create_order", {**ORDER, "idempotency_key": "key_1"})) == \
        "internal_error: the tool failed"
    first = wire.tool_calls()[0]
    assert (first["fault"], first["forwarded"], first["upstream_status"], first["rpc"]["is_error"]) == \
        ("tool_error_after_commit", True, 200, True)
    (row,) = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert (row["outcome"], row["flow_id"]) == ("committed", first["flow_id"])  # the server's own answer was a result
    assert len(wire.effects()) == 1


def test_an_annotation_that_says_idempotent_does_not_make_a_retry_safe(wire: Wire) -> None:
    """The server publishes idempotentHint: true; its calls each commit: a retry after an error result that
    came after the commit is a second effect (what rule H050 catches)."""
    wire.configure([{"id": "fail_after", "action": "tool_error_after_commit",
                     "match": {"tool": "raise_alert", "nth": 1}}])
    alert = {"client_reference": "op_9", "text": "disk full"}
    error_text(wire.call("raise_alert", alert, destination="alerts"))
    structured(wire.call("raise_alert", alert, destination="alerts"))
    assert [e["effect_ref"] for e in wire.effects()] == ["ale_0001", "ale_0002"]


def test_tools_list_publishes_the_declared_annotations_verbatim(tool_servers: DestinationHost) -> None:
    async def listed() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=5) as http, \
                streamable_http_client(tool_servers.urls["orders"] + "/mcp", http_client=http) as (read, write, _), \
                ClientSession(read, write) as client:
            await client.initialize()
            return {t.name: t for t in (await client.list_tools()).tools}
    tools = asyncio.run(asyncio.wait_for(listed(), CALL_LIMIT))
    assert list(tools) == ["create_order", "find_orders", "ping"]
    assert tools["create_order"].annotations is not None
    assert tools["create_order"].annotations.model_dump(exclude_none=True) == \
        {"readOnlyHint": False, "idempotentHint": True}
    assert tools["create_order"].inputSchema["required"] == ["item", "quantity"]
    assert {"idempotency_key", "client_reference"} <= set(tools["create_order"].inputSchema["properties"])
    assert tools["ping"].annotations is None


# -- idempotency, lookups, declared failures -------------------------------------------------------------

def test_argument_idempotency_replays_the_same_arguments_and_refuses_others(wire: Wire) -> None:
    wire.configure()
    first = structured(wire.call("create_order", {**ORDER, "idempotency_key": "key_1"}))
    assert structured(wire.call("create_order", {**ORDER, "idempotency_key": "key_1"})) == first
    assert error_text(wire.call("create_order", {**ORDER, "quantity": 3, "idempotency_key": "key_1"})) == \
        "idempotent_parameter_mismatch: idempotency_key 'key_1' was already used with other arguments"
    # another key, or none, is another order
    assert structured(wire.call("create_order", {**ORDER, "idempotency_key": "key_2"}))["id"] == "ord_0002"
    assert structured(wire.call("create_order", ORDER))["id"] == "ord_0003"
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [(r["outcome"], r["idempotency_key"]) for r in rows] == [
        ("committed", "key_1"), ("replayed", "key_1"), ("rejected", "key_1"), ("committed", "key_2"),
        ("committed", None)]
    assert len(wire.effects()) == 3


def test_natural_key_idempotency_returns_the_existing_resource(wire: Wire) -> None:
    wire.configure()
    first = wire.call("create_shipment", {"client_reference": "op_1", "to": "A"}, destination="shipments",
                      endpoint="/tools")
    again = wire.call("create_shipment", {"client_reference": "op_1", "to": "B"}, destination="shipments",
                      endpoint="/tools")
    assert structured(again) == structured(first) == {"client_reference": "op_1", "to": "A", "id": "shi_0001",
                                                      "status": "created"}
    other = structured(wire.call("create_shipment", {"client_reference": "op_2"}, destination="shipments",
                                 endpoint="/tools"))
    assert other["id"] == "shi_0002"
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [(r["outcome"], r["idempotency_key"]) for r in rows] == \
        [("committed", "op_1"), ("replayed", "op_1"), ("committed", "op_2")]
    assert {r["path"] for r in wire.ledger() if r["method"] != "tools/call"} == {"/tools"}


def test_a_lookup_tool_finds_by_client_reference_and_a_tool_without_effect_commits_nothing(wire: Wire) -> None:
    wire.configure()
    order = structured(wire.call("create_order", ORDER))
    assert structured(wire.call("find_orders", {"client_reference": "op_1"})) == {"items": [order]}
    assert structured(wire.call("find_orders", {"client_reference": "op_2"})) == {"items": []}
    assert structured(wire.call("ping", {}))["ok"] is True
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [(r["kind"], r["outcome"], r["client_reference"]) for r in rows] == [
        ("create_order", "committed", "op_1"), ("find_orders", "read", "op_1"), ("find_orders", "read", "op_2"),
        ("ping", "read", None)]
    assert len(wire.effects()) == 1


def test_bad_calls_are_tool_errors_that_commit_nothing(wire: Wire) -> None:
    wire.configure()
    assert error_text(wire.call("create_order", {"item": "disk"})) == \
        "missing_argument: missing required argument(s): quantity"
    assert error_text(wire.call("cancel_order", {})) == \
        "unknown_tool: no tool 'cancel_order'; valid: create_order, find_orders, ping"
    assert [r["outcome"] for r in wire.ledger() if r["method"] == "tools/call"] == ["rejected", "rejected"]
    assert wire.effects() == []


def test_declared_failures_are_tool_errors_before_or_after_the_commit(wire: Wire) -> None:
    wire.configure()
    notice = {"text": "hello", "client_reference": "op_1"}
    assert error_text(wire.call("send_notice", notice, destination="notices")) == \
        "internal_error: the destination failed"
    assert error_text(wire.call("send_notice", notice, destination="notices")) == \
        "internal_error: the destination failed"
    assert structured(wire.call("send_notice", notice, destination="notices"))["id"] == "not_0002"
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [(r["outcome"], r["effect_ref"]) for r in rows] == [
        ("failed_after_commit", "not_0001"), ("failed_before_commit", None), ("committed", "not_0002")]
    assert [e["effect_ref"] for e in wire.effects()] == ["not_0001", "not_0002"]


def test_a_rate_limit_is_a_tool_error_that_says_when_to_retry(wire: Wire) -> None:
    wire.configure()
    structured(wire.call("book_slot", {}, destination="limited"))
    assert error_text(wire.call("book_slot", {}, destination="limited")) == \
        "rate_limited: too many requests; retry after 7 s"
    rows = [r for r in wire.ledger() if r["method"] == "tools/call"]
    assert [r["outcome"] for r in rows] == ["committed", "rate_limited"]


def test_a_pooled_process_serves_another_declaration_of_its_tool_server(tmp_path: Path) -> None:
    """The pool reuses a process for the same names and services: the next scenario's tools and endpoint
    are taken on reset, without a restart."""
    first = {"orders": {"service": "mcp", "tools": {"create_order": {"effect": "order_created"}}}}
    second = {"orders": {"service": "mcp", "endpoint": "/rpc", "tools": {
        "place_order": {"effect": "order_placed", "idempotency": "natural_key"}}}}
    pool = DestinationPool(tmp_path / "pool")
    try:
        host = pool.acquire(first)
        structured(asyncio.run(call_tool(host.urls["orders"] + "/mcp", "create_order", {})))
        again = pool.acquire(second)
        assert again is host and pool.reused == 1
        url = host.urls["orders"] + "/rpc"
        placed = structured(asyncio.run(call_tool(url, "place_order", {"client_reference": "op_1"})))
        assert placed == structured(asyncio.run(call_tool(url, "place_order", {"client_reference": "op_1"})))
        assert placed["id"] == "ord_0001"  # the reset cleared the first scenario's numbering
        assert [(e["kind"], e["effect_ref"]) for e in host.effects()] == [("order_placed", "ord_0001")]
    finally:
        pool.close()


def test_keys_and_resources_survive_a_restart(tmp_path: Path) -> None:
    spec = {"orders": TOOL_SERVERS["orders"]}
    with DestinationHost(spec, tmp_path / "ledger.sqlite") as host:
        url = host.urls["orders"] + "/mcp"
        call = {**ORDER, "idempotency_key": "key_1"}
        first = asyncio.run(call_tool(url, "create_order", call))
        host.restart()
        assert host.urls["orders"] + "/mcp" == url  # the same port
        again = asyncio.run(call_tool(url, "create_order", call))
        assert structured(again) == structured(first)
        assert len(host.effects()) == 1


# -- the declaration and the contract --------------------------------------------------------------------

def test_the_contract_says_tools_their_annotations_and_the_key_argument() -> None:
    contract = describe(TOOL_SERVERS["orders"])
    assert contract.to_dict() == {
        "service": "mcp", "transport": "mcp", "endpoint": "/mcp",
        "idempotency": {"style": "client_token", "header": None, "body_field": "idempotency_key",
                        "retention_seconds": None, "scope": "global", "required": False},
        "lookup": {"method": "tools/call", "path": "find_orders", "query_param": "client_reference",
                   "result_field": "items", "lag_seconds": 0.0},
        "operations": {"create_order": {
            "method": "tools/call", "path": "create_order", "client_reference_field": "client_reference",
            "effect_ref_field": "id", "annotations": {"readOnlyHint": False, "idempotentHint": True},
            "required_params": ["item", "quantity"]}}}
    assert describe(TOOL_SERVERS["shipments"]).idempotency.to_dict()["style"] == "natural_key"
    assert describe(TOOL_SERVERS["shipments"]).endpoint == "/tools"
    assert describe(TOOL_SERVERS["notices"]).idempotency.style == "none"


@pytest.mark.parametrize("name", sorted(TOOL_SERVERS))
def test_the_contract_json_and_the_dumped_spec_read_back(name: str) -> None:
    spec = DestinationSpec.model_validate(TOOL_SERVERS[name])
    dumped = spec.model_dump(mode="json")
    assert DestinationSpec.model_validate(dumped).model_dump(mode="json") == dumped  # the process and pool read it
    as_json = json.loads(json.dumps(describe(spec).to_dict()))
    assert DestinationContract.from_dict(as_json) == describe(spec)
    assert DestinationContract.from_dict(as_json).to_dict() == as_json


SCENARIO = """name: bad
description: one bad MCP declaration
destinations:
  orders:
    service: mcp
{body}
intents:
  - {{intent_id: t1, kind: create_order, destination: orders, params: {{item: x}}}}
"""


@pytest.mark.parametrize("body, message", [
    ("    tools:\n      create_order: {effect: order_created, idempotency: sometimes}",
     "FILE:7: destinations.orders.tools.create_order.idempotency: 'sometimes' is not valid (valid: 'none', "
     "'argument' or 'natural_key')"),
    ("    tools:\n      create_order: {effect: order_created, idempotency_key: k}",
     "FILE:7: destinations.orders.tools.create_order.idempotency_key: unknown key 'idempotency_key'; did you mean "
     "'idempotency'? (valid keys: description, effect, required, idempotency, idempotency_argument, natural_key, "
     "lookup, annotations)"),
    ("    endpoint: /mcp",
     "FILE:4: destinations.orders: service 'mcp' needs `tools:`, at least one (e.g. create_order: "
     "{effect: order_created})"),
    ("    tools:\n      create_order: {effect: order_created, idempotency: argument}\n"
     "      cancel_order: {effect: order_cancelled}",
     "FILE:4: destinations.orders: the tools with an effect of one MCP destination declare one idempotency (the "
     "agent is told one per destination); here create_order: argument (idempotency_key), cancel_order: none"),
    ("    tools:\n      create_order: {effect: order_created}\n      find_orders: {lookup: find_all}",
     "FILE:8: destinations.orders: tools.find_orders.lookup: 'find_all' is not a tool with an effect; valid: "
     "create_order"),
    ("    tools:\n      create_order: {effect: order_created, annotations: {idempotent: true}}",
     "FILE:7: destinations.orders.tools.create_order.annotations.idempotent: unknown key 'idempotent'; did you mean "
     "'idempotentHint'? (valid keys: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint)"),
    ("    tools:\n      create_order: {idempotency: argument}",
     "FILE:7: destinations.orders.tools.create_order: idempotency 'argument' deduplicates effects, and this tool "
     "declares no effect; valid without one: 'none'"),
    ("    tools:\n      create_order: {effect: order_created, idempotency_argument: token}",
     "FILE:7: destinations.orders.tools.create_order: idempotency_argument names the key of idempotency "
     "'argument', and this tool's idempotency is 'none'"),
    ("    tools:\n      place_order: {effect: order_created}",
     "FILE:9: intents[0].kind: unknown operation kind for 'orders' 'create_order'"),
    ("    tools:\n      create_order: {effect: order_created}\n    failures: [{at: 1, fault: drop_after_exec}]",
     "FILE:4: destinations.orders: fault 'drop_after_exec' is not available for service 'mcp'; valid: "
     "error_before_commit, error_after_commit, rate_limited"),
    ("    tools:\n      create_order: {effect: order_created}\n    retention_seconds: 5",
     "FILE:4: destinations.orders: retention_seconds: an MCP destination remembers its keys forever (leave it out)"),
    ("    endpoint: mcp\n    tools:\n      create_order: {effect: order_created}",
     "FILE:4: destinations.orders: endpoint 'mcp' must be a path starting with '/' (e.g. /mcp)"),
    ("    tools:\n      'create order': {effect: order_created}",
     "FILE:4: destinations.orders: tool name 'create order': 1 to 128 of A-Z a-z 0-9 _ - . (the MCP "
     "specification's)"),
    ("    idempotency: stripe\n    tools:\n      create_order: {effect: order_created}",
     "FILE:4: destinations.orders: idempotency 'stripe': an MCP destination declares it per tool "
     "(tools.<name>.idempotency: none | argument | natural_key; 'none' here)"),
])
def test_a_bad_declaration_names_its_file_line_key_and_the_valid_choices(tmp_path: Path, body: str,
                                                                         message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO.format(body=body))
    with pytest.raises(ScenarioError) as info:
        load(path)
    assert str(info.value).replace(str(path), "FILE").startswith(message)


def test_the_documented_declaration_is_valid_and_its_contract_the_documented_one() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "destinations.md").read_text()
    section = text[text.index("## MCP tool servers"):text.index("## Generic destinations")]
    (block,) = [b.split("```", 1)[0] for b in section.split("```yaml\n")[1:]]
    contract = describe(yaml.safe_load(block)["destinations"]["orders"])
    assert (contract.transport, contract.endpoint, contract.idempotency.style, contract.idempotency.body_field) == \
        ("mcp", "/mcp", "client_token", "idempotency_key")
    assert list(contract.operations) == ["create_order"] and contract.lookup is not None
    assert contract.operations["create_order"].annotations == {
        "readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True}


def test_exploration_draws_only_options_an_mcp_destination_takes(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from harness.strategies import destination_options

    path = tmp_path / "mcp.yaml"
    path.write_text(SCENARIO.format(body="    tools:\n      create_order: {effect: order_created, idempotency: "
                                         "argument}\n      find_orders: {lookup: create_order}"))
    scenario = load(path)
    own = scenario.destinations["orders"].model_dump(mode="json")

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.data())
    def drawn_options_validate(data: st.DataObject) -> None:
        changes = data.draw(destination_options(scenario)).get("orders", {})
        assert "retention_seconds" not in changes  # its keys never expire
        DestinationSpec.model_validate({**own, **changes})

    drawn_options_validate()


def test_tools_belong_to_an_mcp_destination_only() -> None:
    with pytest.raises(ValueError, match="tools applies to service 'mcp' only, not 'tickets'"):
        DestinationSpec.model_validate({"service": "tickets", "tools": {"x": {}}})
