"""One MCP ``tools/call`` through a fresh session of the installed ``mcp`` SDK, 1.x or 2.x: how the bundled agents
(the reference agent, the framework agents' tools) call a tool. 2.x renamed the transport
(``streamable_http_client``, over its own ``httpx2`` client) and takes timeouts as seconds; the wire the fault
proxy sees is the same JSON-RPC over HTTP. A destination served over stdio (``mcp_transport: stdio``) is reached
through the SDK's stdio client, which starts the server's command as a subprocess, as a host does.

Before the call is written nothing of it has left (``not_sent``); once it is, a broken or late answer leaves its
fate unknown (``sent_no_response``)."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from harness.contract import TRACEPARENT_HEADER, mcp_sdk_major

STDIO_START_SECONDS = 15.0  # how long a stdio server may take to start and answer initialize


@dataclass(frozen=True)
class ToolResult:
    """A CallToolResult as the MCP wire spells it, whatever the SDK's attribute names (1.x isError, 2.x is_error):
    whether it is an error result, its resource (structuredContent, else the JSON of its first text content)
    and that text."""

    is_error: bool
    resource: Any
    text: str

    @classmethod
    def of(cls, result: Any) -> ToolResult:
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        text = next((str(c.get("text")) for c in wire.get("content") or () if c.get("type") == "text"), "")
        resource = wire.get("structuredContent")
        if resource is None:
            try:
                resource = json.loads(text)
            except ValueError:
                resource = None
        return cls(bool(wire.get("isError")), resource, text)


@contextlib.asynccontextmanager
async def _session(url: str, headers: dict[str, str], connect: float, read: float,
                   server: Sequence[str] | None = None) -> AsyncIterator[Any]:
    from mcp import ClientSession  # only agents that talk MCP pay for the import

    seconds: Any = read if mcp_sdk_major() >= 2 else timedelta(seconds=read)  # 2.x takes seconds, 1.x a timedelta
    if server:  # over stdio: the server started as a subprocess, as a host starts one; stopped on leaving
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=server[0], args=list(server[1:]))
        # the session's default timeout bounds initialize, which waits for the process to start (an interpreter
        # importing its SDK: seconds on a busy machine, where a socket connects in a millisecond); the tool call
        # itself passes the read timeout
        starting = max(read, STDIO_START_SECONDS)
        start: Any = starting if mcp_sdk_major() >= 2 else timedelta(seconds=starting)
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream, read_timeout_seconds=start) as session:
                yield session
        return
    if mcp_sdk_major() >= 2:
        import httpx2  # type: ignore[import-not-found,unused-ignore]  # mcp 2.x's own HTTP client
        from mcp.client.streamable_http import streamable_http_client

        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(connect + read, connect=connect))
        async with client, streamable_http_client(url, http_client=client, terminate_on_close=False) as streams:
            async with ClientSession(streams[0], streams[1], read_timeout_seconds=seconds) as session:
                yield session
        return
    from mcp.client.streamable_http import streamablehttp_client

    # the name every 1.x release since 1.20 has (later ones deprecate it for streamable_http_client)
    warnings.filterwarnings("ignore", "Use `streamable_http_client` instead", DeprecationWarning)
    async with streamablehttp_client(url, headers=headers, timeout=connect + read,
                                     terminate_on_close=False) as (read_stream, write_stream, _):
        async with ClientSession(read_stream, write_stream, read_timeout_seconds=seconds) as session:
            yield session


async def call_tool(url: str, tool: str, arguments: dict[str, Any], *, traceparent: str | None,
                    headers: dict[str, str] | None = None, connect_timeout: float = 1.0,
                    read_timeout: float = 1.5,
                    server: Sequence[str] | None = None) -> tuple[str, ToolResult | None, BaseException | None]:
    """(dispatch state, the tool's result or None, what went wrong: the first leaf of an exception group).
    ``server``: the words of a stdio server's command (its HARNESS_MCP_SERVER_<NAME>), used in place of ``url``."""
    meta = {TRACEPARENT_HEADER: traceparent} if traceparent else None
    timeout: Any = read_timeout if mcp_sdk_major() >= 2 else timedelta(seconds=read_timeout)
    calling = False
    try:
        async with _session(url, headers or {}, connect_timeout, read_timeout, server) as session:
            await session.initialize()
            calling = True
            result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout, meta=meta)
    except Exception as exc:  # noqa: BLE001  (an anyio task group raises an ExceptionGroup of anything)
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        return ("sent_no_response" if calling else "not_sent"), None, cause
    return "response_received", ToolResult.of(result), None
