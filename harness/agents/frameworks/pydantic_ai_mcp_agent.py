"""A pydantic-ai agent on pydantic-ai's own MCP client: an ``Agent`` whose tools are an ``MCPToolset`` (FastMCP's
``Client`` over streamable HTTP; the ``mcp`` extra of pydantic-ai-slim) of the intent's MCP tool server, on a
scripted ``FunctionModel`` (one call of the server's tool per intent, another after a retry prompt).

    python -m harness.agents.frameworks.pydantic_ai_mcp_agent          # process_tool_call: key, reference, lookup
    python -m harness.agents.frameworks.pydantic_ai_mcp_agent --wrong  # MCPToolset as shipped

MCPToolset retries through the model: with ``tool_error_behavior='retry'`` (the default) an error result
(``isError``), and a protocol error or a lost answer, become ``ModelRetry``, a retry prompt the model answers
with the same call, up to ``max_retries`` (unset: the agent's, 1). The model's arguments are all it sends: no
key, no reference. ``process_tool_call``, the toolset's hook around each call, is where the operation's key and
reference go in (as the tool's arguments; the traceparent as the call's ``_meta``) and where the lookup tool is
called before a second call. Both rows log each call through that hook (mcp_adapters.py). The client's read
timeout is the catalogue's (1.5 s; the default, 5 minutes, would wait out mcp_slow_result's held answer).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx2  # type: ignore[import-not-found,unused-ignore]  # FastMCP 4's HTTP client
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.mcp import MCPToolset

from harness.agents.frameworks.mcp_adapters import (
    Via,
    WireCount,
    as_model_tool,
    leaf,
    observed,
    reconciled,
    said,
)
from harness.agents.frameworks.mcp_tools import READ_TIMEOUT
from harness.agents.frameworks.pydantic_ai_agent import scripted
from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import SafeToRetry, ToolSpec, destination_url, parse_mode, run_intents
from harness.agents.mcp_client import ToolResult
from harness.contract import TRACEPARENT_HEADER


def classify(exc: BaseException) -> tuple[str, ToolResult | None, str | None]:
    """What MCPToolset's exception says of the call: a ModelRetry of its own (no cause) is an error result;
    one caused by the transport or the protocol, or anything else, an answer that never came."""
    if isinstance(exc, ModelRetry) and exc.__cause__ is None:
        return "response_received", ToolResult(True, None, exc.message), None
    cause = leaf(exc.__cause__ or exc)
    return ("not_sent" if "Connect" in type(cause).__name__ else "sent_no_response"), None, said(cause)


def toolset(spec: ToolSpec, wire: WireCount, client: Any, *, wrong: bool) -> MCPToolset[Any]:
    """The intent's MCP server as pydantic-ai's toolset over ``client``, whose requests ``wire`` counts."""

    async def process_tool_call(ctx: Any, call_tool: Any, name: str, tool_args: dict[str, Any]) -> Any:
        async def call(tool: str, arguments: dict[str, Any], traceparent: str) -> Any:
            return await call_tool(tool, arguments, metadata={TRACEPARENT_HEADER: traceparent})

        via = Via(call, classify, wire)
        if wrong:
            return await observed(spec, via, name, tool_args)
        try:
            return await reconciled(spec, via, tool_args)
        except SafeToRetry as exc:
            raise ModelRetry(str(exc)) from exc

    return MCPToolset(destination_url(spec), process_tool_call=process_tool_call, read_timeout=READ_TIMEOUT,
                      http_client=client, max_retries=None if wrong else MAX_EXECUTIONS - 1)


def main(argv: list[str] | None = None) -> None:
    args = parse_mode(argv, __doc__)

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        for _ in range(MAX_EXECUTIONS - 1):
            wire = WireCount()
            try:
                return asyncio.run(run(intent, spec, wire, wrong=args.wrong))
            except Exception:
                # the correct agent: a new run (a new session) for the same operation when the session died; the
                # run raises what FastMCP's dead transport stored, not our SessionLost, so the wire says it
                if not wire.session_lost:
                    raise
        return asyncio.run(run(intent, spec, WireCount(), wrong=args.wrong))

    run_intents(run_one)


async def run(intent: dict[str, Any], spec: ToolSpec, wire: WireCount, *, wrong: bool) -> str:
    """One agent run, its toolset a new MCP session; the same operation (run_intents's scope) across runs."""
    # FastMCP 4's own HTTP client (httpx2, following redirects as FastMCP builds it), with the hook that counts its
    # requests; the toolset never closes a client it was given: this block does
    async with httpx2.AsyncClient(event_hooks={"request": [wire.request_hook]}, follow_redirects=True) as client:
        agent = Agent(scripted(intent, as_model_tool(spec)), toolsets=[toolset(spec, wire, client, wrong=wrong)])
        return str((await agent.run(f"carry out {intent['intent_id']}")).output)


if __name__ == "__main__":
    main(sys.argv[1:])
