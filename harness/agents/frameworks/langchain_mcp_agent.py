"""A LangGraph agent on langchain-mcp-adapters, LangChain's own MCP client: the tools of a ``MultiServerMCPClient``
(``get_tools()``, streamable HTTP) of the intent's MCP tool server in a ``ToolNode``, on the scripted model of
langgraph_agent.py (one call of the server's tool per intent, then a final answer), the retry on the tool node.

    python -m harness.agents.frameworks.langchain_mcp_agent          # interceptor: key, reference, lookup
    python -m harness.agents.frameworks.langchain_mcp_agent --wrong  # MultiServerMCPClient as shipped, RetryPolicy()

What the adapter does with a call (0.3.2): each tools/call opens a session of its own (initialize, the call, the
session's DELETE), since ``get_tools()`` gives tools bound to the connection, not to a session; an error result
(``isError``) is handed to the model as a ``ToolMessage`` with ``status="error"`` (``handle_tool_errors=True``,
the default), asking nothing; a lost answer or a timeout raises out of the tool, through the ToolNode (whose
default handler turns only invalid arguments into a message), to the node's retry policy. ``RetryPolicy()``,
LangGraph's default ``retry_on``, runs the node again with the same tool call: a new session, the same arguments.
The model's arguments are all the adapter sends: no key, no reference.

``tool_interceptors``, the client's hook around each call (its handler may be called again, with other arguments
or another tool: ``MCPToolCallRequest.override``), is where the operation's key and reference go in (as the
tool's arguments; the traceparent as the call's HTTP header: the adapter passes no ``_meta``) and where the lookup
tool is called before a second call. Both rows log each call through that interceptor (mcp_adapters.py). The client's
read timeout is the catalogue's (1.5 s; the default, ``sse_read_timeout`` 5 minutes, would wait out
mcp_slow_result's held answer).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult, ToolCallInterceptor
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import RetryPolicy
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

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
from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import SafeToRetry, ToolSpec, call_id, destination_url, parse_mode, run_intents
from harness.agents.mcp_client import ToolResult
from harness.contract import TRACEPARENT_HEADER

Handler = Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]


def classify(exc: BaseException) -> tuple[str, ToolResult | None, str | None]:
    """What the adapter's exception says: an answer that never came (an error result is returned, not raised,
    inside the interceptor chain)."""
    cause = leaf(exc.__cause__ or exc)
    return ("not_sent" if "Connect" in type(cause).__name__ else "sent_no_response"), None, said(cause)


@dataclass
class ToolCallCount(WireCount):
    """The tools/call requests the adapter's HTTP client sent: every call opens a session of its own, so its
    initialize is sent even when the call is not; only a tools/call POST counts. The call's traceparent goes on
    that request alone: the adapter passes no ``_meta``, and a header given through the interceptor
    (``request.override(headers=...)``) goes on every request of the call's session, its initialize first."""

    traceparent: str | None = None

    async def request_hook(self, request: Any) -> None:
        if request.method == "POST" and b'"tools/call"' in request.content:
            self.sent += 1
            if self.traceparent is not None:
                request.headers[TRACEPARENT_HEADER] = self.traceparent


def interceptor(spec: ToolSpec, wire: ToolCallCount, *, wrong: bool) -> ToolCallInterceptor:
    """The client's tool interceptor: every call logged; in the correct row, the key, reference and lookup."""

    async def intercept(request: MCPToolCallRequest, handler: Handler) -> MCPToolCallResult:
        async def call(tool: str, arguments: dict[str, Any], traceparent: str) -> MCPToolCallResult:
            wire.traceparent = traceparent  # one call at a time: the hook puts it on this call's tools/call
            try:
                return await handler(request.override(name=tool, args=arguments))
            finally:
                wire.traceparent = None

        via = Via(call, classify, wire, read=ToolResult.of)
        if wrong:
            result: MCPToolCallResult = await observed(spec, via, request.name, request.args)
            return result
        said_back = await reconciled(spec, via, request.args)  # SafeToRetry: the node's retry policy runs it again
        return CallToolResult(content=[TextContent(type="text", text=said_back)])

    return intercept


def client(spec: ToolSpec, wire: ToolCallCount, *, wrong: bool) -> MultiServerMCPClient:
    """The intent's MCP server as langchain-mcp-adapters' client, whose tools/call requests ``wire`` counts."""

    def http_client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        made = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)  # the adapter's default (httpx)
        made.event_hooks = {**made.event_hooks, "request": [*made.event_hooks["request"], wire.request_hook]}
        return made

    connection: Any = {"transport": "streamable_http", "url": destination_url(spec), "sse_read_timeout": READ_TIMEOUT,
                       "httpx_client_factory": http_client}
    return MultiServerMCPClient({spec.destination: connection},
                                tool_interceptors=[interceptor(spec, wire, wrong=wrong)])


async def run(intent: dict[str, Any], spec: ToolSpec, wire: ToolCallCount, *, wrong: bool) -> str:
    """One graph run: the server's tools listed (a session of their own), the model's call run by the ToolNode."""
    tools = await client(spec, wire, wrong=wrong).get_tools()
    name = as_model_tool(spec).name

    def model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        """The scripted chat model: the server's tool called with the intent's params, then a final answer."""
        answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if not answers:
            return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": dict(intent["params"]),
                                                            "id": call_id(intent, 1)}])]}
        return {"messages": [AIMessage(f"{answers[-1].status}: {answers[-1].content}")]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    # as a team writes it: LangGraph's RetryPolicy() (default_retry_on) on the ToolNode; the correct row retries
    # only what its interceptor says is safe
    retry = RetryPolicy() if wrong else RetryPolicy(retry_on=SafeToRetry, max_attempts=MAX_EXECUTIONS)
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode(tools), retry_policy=retry)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    state = await graph.compile().ainvoke({"messages": [HumanMessage(f"carry out {intent['intent_id']}")]})
    return str(state["messages"][-1].content)


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        for _ in range(MAX_EXECUTIONS - 1):
            wire = ToolCallCount()
            try:
                return asyncio.run(run(intent, spec, wire, wrong=wrong))
            except Exception:
                # the correct agent: a new run for the same operation when a call could not be sent at all
                if not wire.session_lost:
                    raise
        return asyncio.run(run(intent, spec, ToolCallCount(), wrong=wrong))

    run_intents(run_one)


if __name__ == "__main__":
    main(sys.argv[1:])
