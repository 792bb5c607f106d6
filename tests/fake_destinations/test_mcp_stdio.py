"""The fake MCP tool server over stdio: the `mcp` SDK's own stdio client starts the server's command
(``fake_destinations.mcp_stdio.command``) as a subprocess, as a host does, and calls tools on the real
destination process through the real fault proxy. Each test reads what the client saw, the proxy journal and
the effect ledger: the same rows as over Streamable HTTP (tests/fake_destinations/test_mcp.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult

from fake_destinations import mcp_stdio
from fake_destinations.host import DestinationHost
from fake_destinations.ledger import read_effects, read_requests
from harness.journal import read_journal
from harness.proxy.host import ProxyHost

ORDER = {"item": "disk", "quantity": 2, "client_reference": "op_1", "idempotency_key": "key_1"}
SERVERS = {"orders": {"service": "mcp", "mcp_transport": "stdio", "tools": {
    "create_order": {"effect": "order_created", "required": ["item", "quantity"], "idempotency": "argument"}}}}
CALL_LIMIT = 30.0  # seconds: a call that hangs fails its test instead of the run


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DestinationHost]:
    folder = tmp_path_factory.mktemp("mcp-stdio")
    host = DestinationHost(SERVERS, folder / "ledger.sqlite", log_path=folder / "destinations.log")
    try:
        host.start()
        yield host
    finally:
        host.stop()


class Pipe:
    """The proxy in front of the tool server for one test, the server's command, and what each side recorded."""

    def __init__(self, proxy: ProxyHost, host: DestinationHost, journal: Path) -> None:
        self.proxy, self.host, self.journal_path = proxy, host, journal
        self.server: list[str] = []

    def configure(self, rules: list[dict[str, Any]] = ()) -> Pipe:  # type: ignore[assignment]
        url = self.proxy.configure(self.host.urls, list(rules), self.journal_path).urls["orders"]
        self.server = mcp_stdio.command(url + "/mcp")
        return self

    def call(self, arguments: dict[str, Any], read_timeout: float = 10.0) -> CallToolResult | BaseException:
        """One create_order in a session of its own: the server started for it and stopped after it."""
        async def session() -> CallToolResult:
            params = StdioServerParameters(command=self.server[0], args=self.server[1:])
            async with stdio_client(params) as (read, write), \
                    ClientSession(read, write, read_timeout_seconds=timedelta(seconds=CALL_LIMIT)) as client:
                await client.initialize()
                return await client.call_tool("create_order", arguments,
                                              read_timeout_seconds=timedelta(seconds=read_timeout))
        try:
            return asyncio.run(asyncio.wait_for(session(), CALL_LIMIT))
        except TimeoutError:
            raise
        except BaseException as exc:  # noqa: BLE001  what left the session, the first leaf of a group
            while isinstance(exc, BaseExceptionGroup):
                exc = exc.exceptions[0]
            return exc

    def tool_calls(self) -> list[dict[str, Any]]:
        self.proxy.finish()
        return [e for e in read_journal(self.journal_path) if (e["rpc"] or {}).get("method") == "tools/call"]

    def effects(self) -> list[str]:
        return [e["effect_ref"] for e in read_effects(self.host.ledger_path)]


@pytest.fixture
def pipe(tool_server: DestinationHost, tmp_path: Path) -> Iterator[Pipe]:
    tool_server.reset()
    proxy = ProxyHost.shared()
    try:
        yield Pipe(proxy, tool_server, tmp_path / "journal.ndjson")
    finally:
        proxy.finish()


def test_a_call_over_stdio_is_journaled_and_ledgered_as_over_http(pipe: Pipe) -> None:
    result = pipe.configure().call(ORDER)
    assert isinstance(result, CallToolResult) and not result.isError, result
    assert result.structuredContent == {**ORDER, "id": "ord_0001", "status": "created"}
    (call,) = pipe.tool_calls()
    journal = read_journal(pipe.journal_path)
    assert [e["rpc"]["method"] for e in journal] == ["initialize", "notifications/initialized", "tools/call",
                                                     "tools/list"]  # every message on the pipe is one flow
    assert (call["rpc"]["tool"], call["idempotency_key"], call["rpc"]["is_error"]) == ("create_order", "key_1", False)
    [row] = [r for r in read_requests(pipe.host.ledger_path) if r["method"] == "tools/call"]
    assert (row["flow_id"], row["outcome"], row["effect_ref"]) == (call["flow_id"], "committed", "ord_0001")


def test_a_result_lost_after_the_commit_is_the_server_dying_and_its_restart_keeps_the_key(pipe: Pipe) -> None:
    """Nothing crosses the pipe: the server exits mid-call (the client's session reads the end of its stdout);
    the next start of the same command is the server restarted, and the key replays the first order."""
    lost = pipe.configure([{"id": "lose", "action": "drop_response_after_commit",
                            "match": {"tool": "create_order", "nth": 1}}]).call(ORDER)
    assert isinstance(lost, McpError) and "Connection closed" in str(lost), lost
    again = pipe.call(ORDER)
    assert isinstance(again, CallToolResult) and again.structuredContent["id"] == "ord_0001"  # type: ignore[index]
    first, second = pipe.tool_calls()
    assert (first["fault"], first["forwarded"], first["client_outcome"]) == \
        ("drop_response_after_commit", True, "connection_closed")
    assert second["fault"] is None and pipe.effects() == ["ord_0001"]


def test_an_error_result_after_the_commit_crosses_the_pipe_as_an_error_result(pipe: Pipe) -> None:
    result = pipe.configure([{"id": "fail_after", "action": "tool_error_after_commit",
                              "match": {"tool": "create_order", "nth": 1}}]).call(ORDER)
    assert isinstance(result, CallToolResult) and result.isError, result
    assert result.content[0].text == "internal_error: the tool failed"  # type: ignore[union-attr]
    (call,) = pipe.tool_calls()
    assert (call["fault"], call["rpc"]["is_error"]) == ("tool_error_after_commit", True)
    assert pipe.effects() == ["ord_0001"]


def test_a_held_result_is_a_timeout_of_call_tool_and_the_effect_stands(pipe: Pipe) -> None:
    held = pipe.configure([{"id": "slow", "action": "hold_response", "hold_ms": 3000, "then": "deliver",
                            "match": {"tool": "create_order", "nth": 1}}]).call(ORDER, read_timeout=0.5)
    assert isinstance(held, McpError) and "Timed out" in str(held), held
    (call,) = pipe.tool_calls()
    assert (call["fault"], call["forwarded"], call["client_outcome"]) == ("hold_response", True, "timeout")
    assert pipe.effects() == ["ord_0001"]


# -- the relay's own words, without a destination ------------------------------------------------------

@pytest.mark.parametrize("status, body, request_id, written", [
    (202, b"", None, []),  # a notification accepted: nothing on the pipe
    (200, b'{"jsonrpc": "2.0", "id": 3, "result": {}}', 3, [{"jsonrpc": "2.0", "id": 3, "result": {}}]),
    (502, b"<html>bad gateway</html>", 4, [{"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32603, "message": "the tool server's backend answered HTTP 502"}}]),
    (502, b"", None, []),  # a notification's failure has nobody to answer
])
def test_an_http_answer_becomes_what_a_stdio_server_writes(status: int, body: bytes, request_id: Any,
                                                          written: list[dict[str, Any]]) -> None:
    assert mcp_stdio.answers(status, body, request_id) == written


def test_the_server_runs_isolated_and_dies_when_its_backend_is_unreachable(tmp_path: Path) -> None:
    """``python -I``: an agent's PYTHONPATH (here one whose ``mcp`` is a trap) never reaches it; a request that
    gets no answer ends the process with EXIT_LOST and nothing on stdout."""
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text("raise SystemExit('the agent path was imported')\n")
    server = mcp_stdio.command("http://127.0.0.1:9/mcp")  # the discard port: refused
    assert server[:2] == [sys.executable, "-I"]
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    with subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}) as process:
        try:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            process.stdin.write(json.dumps(initialize) + "\n")
            process.stdin.flush()  # and kept open, as a client keeps it while it waits for the answer
            assert process.wait(timeout=60) == mcp_stdio.EXIT_LOST, process.stderr.read()
            assert process.stdout.read() == ""
            assert "no answer to initialize" in process.stderr.read()
        finally:
            process.kill()


@pytest.mark.parametrize("declaration, words", [
    ({"service": "tickets", "mcp_transport": "stdio"}, "mcp_transport applies to service 'mcp' only, not 'tickets'"),
    ({"service": "mcp", "mcp_transport": "pipe", "tools": {"t": {}}}, "'http' or 'stdio'"),
])
def test_a_transport_on_the_wrong_destination_or_of_no_kind_is_refused_by_name(declaration: dict[str, Any],
                                                                               words: str) -> None:
    from pydantic import ValidationError

    from fake_destinations.spec import DestinationSpec

    with pytest.raises(ValidationError, match=words):
        DestinationSpec.model_validate(declaration)
