"""An OpenAI Agents SDK agent on the SDK's own MCP client: an ``Agent`` whose ``mcp_servers`` is an
``MCPServerStreamableHttp`` of the intent's MCP tool server, run by ``Runner`` on the scripted model of
openai_agents_agent.py (it calls the server's tool, and again when the output says "Please try again").

    python -m harness.agents.frameworks.openai_agents_mcp_agent          # key, reference, lookup; retry when safe
    python -m harness.agents.frameworks.openai_agents_mcp_agent --wrong  # MCPServerStreamableHttp as shipped

What the SDK does with a failed call: a lost answer or a timeout raises, and the failure_error_function (unset
on the server: the agent's default) tells the model "An error occurred while running the tool. Please try
again", so the model calls again; an error result (``isError``) is handed to the model as the tool's output,
its text and nothing more, so a model that reads it as a failure may call again too (the scripted one does not).
``max_retry_attempts`` (0 by default) would rerun ``call_tool`` itself, blind. The SDK has no hook on a call's
arguments (``tool_meta_resolver`` gives ``_meta`` only, where this server reads no key), so the key and
reference go in through a subclass's ``call_tool``, the one place both rows also log each call
(mcp_adapters.py). The session's read timeout is the catalogue's (1.5 s; the default is 5 s).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx2  # type: ignore[import-not-found,unused-ignore]  # mcp 2.x's HTTP client
from agents import Agent, RunContextWrapper, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from mcp.types import CallToolResult, TextContent

from harness.agents.frameworks.mcp_adapters import Via, WireCount, as_model_tool, leaf, observed, reconciled, said
from harness.agents.frameworks.mcp_tools import READ_TIMEOUT
from harness.agents.frameworks.openai_agents_agent import RETRY_ASKED, ScriptedModel
from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import (
    SafeToRetry,
    ToolSpec,
    destination_url,
    parse_mode,
    run_intents,
    the_operation,
)
from harness.agents.mcp_client import ToolResult
from harness.contract import TRACEPARENT_HEADER


def classify(exc: BaseException) -> tuple[str, ToolResult | None, str | None]:
    """What ``call_tool``'s exception says: an answer that never came (the SDK returns error results)."""
    cause = leaf(exc.__cause__ or exc)
    return ("not_sent" if "Connect" in type(cause).__name__ else "sent_no_response"), None, said(cause)


def only_safe_retries(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """The correct server's failure_error_function: a retry asked for only after SafeToRetry (the SDK wraps
    what call_tool raised in an AgentsException)."""
    if isinstance(error, SafeToRetry) or isinstance(error.__cause__, SafeToRetry):
        return f"The tool did not finish: {error.__cause__ or error}. {RETRY_ASKED}."
    return f"The tool failed and must not be called again for this request: {type(error).__name__}: {error}"


class LoggedServer(MCPServerStreamableHttp):
    """The intent's MCP server; its ``call_tool`` logs each call as an attempt of the operation (mcp_adapters),
    and in the correct row carries the operation's key and reference and looks up before a second call."""

    def __init__(self, spec: ToolSpec, *, wrong: bool) -> None:
        self.spec, self.wrong, self.wire = spec, wrong, WireCount()

        def http_client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
            # the SDK's default client (follow_redirects off), with the hook that counts its requests
            return httpx2.AsyncClient(follow_redirects=False, headers=headers, timeout=timeout, auth=auth,
                                      event_hooks={"request": [self.wire.request_hook]})

        settings: dict[str, Any] = {} if wrong else {"failure_error_function": only_safe_retries}
        super().__init__(params={"url": destination_url(spec), "httpx_client_factory": http_client},
                         name=spec.destination, client_session_timeout_seconds=READ_TIMEOUT, **settings)

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None,
                        meta: dict[str, Any] | None = None) -> CallToolResult:
        async def call(tool: str, args: dict[str, Any], traceparent: str) -> CallToolResult:
            return await MCPServerStreamableHttp.call_tool(self, tool, args, meta={**(meta or {}),
                                                                               TRACEPARENT_HEADER: traceparent})

        via = Via(call, classify, self.wire, read=ToolResult.of)
        if self.wrong:
            result: CallToolResult = await observed(self.spec, via, tool_name, arguments or {})
            return result
        said_back = await reconciled(self.spec, via, arguments or {})  # SafeToRetry: only_safe_retries asks again
        return CallToolResult(content=[TextContent(type="text", text=said_back)])


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong
    set_tracing_disabled(True)  # the SDK's tracing would export to OpenAI: no network here

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        for _ in range(MAX_EXECUTIONS - 1):
            try:
                return asyncio.run(run(intent, spec, wrong=wrong))
            except Exception:
                # the correct agent: a lost answer kills the session, and the run dies at its next tools/list;
                # a new run (a new session) for the same operation, whose first step is the lookup
                last = the_operation(spec).last_attempt
                if wrong or last is None or not last.uncertain:
                    raise
        return asyncio.run(run(intent, spec, wrong=wrong))

    run_intents(run_one)


async def run(intent: dict[str, Any], spec: ToolSpec, *, wrong: bool) -> str:
    """One agent run on a new MCP session; the same operation (run_intents's scope) across runs."""
    async with LoggedServer(spec, wrong=wrong) as server:
        agent = Agent(name="operator", instructions="Carry out the request with the tool.", mcp_servers=[server],
                      model=ScriptedModel(intent, as_model_tool(spec)))
        result = await Runner.run(agent, f"carry out {intent['intent_id']}", max_turns=2 * MAX_EXECUTIONS + 2)
        return str(result.final_output)


if __name__ == "__main__":
    main(sys.argv[1:])
