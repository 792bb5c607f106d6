"""What the agents on a framework's own MCP adapter share, and no framework: the tool the model calls is the MCP
server's own (the adapter lists it), and the adapter makes the tools/call. The operation (mcp_tools.py's
McpOperation, opened by tools.run_intents around the framework run) logs each call the adapter makes, through
the one hook each adapter offers around its call (pydantic-ai's ``process_tool_call``, a subclass of the Agents
SDK's ``MCPServerStreamableHttp``, langchain-mcp-adapters' ``tool_interceptors``), so the log says what crossed
the wire whatever the framework then does.

Two hook bodies, as for the framework tools (tools.py):
- ``observed``: the adapter as shipped: the model's arguments sent unchanged (no key, no reference), only
  logged; what the adapter raised is raised again, so its own retry runs as it would without the hook.
- ``reconciled``: tools.carry_out_mcp through the adapter: the operation's key and reference added to the
  arguments, the lookup tool called (through the same adapter) before a call after an unknown outcome;
  SafeToRetry when a new execution is safe.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.agents.frameworks.tools import ToolSpec, carry_out_mcp, the_operation
from harness.agents.mcp_client import ToolResult

# the adapter's own call: (tool, arguments, traceparent) -> what the adapter returned (it raises on a failure)
AdapterCall = Callable[[str, dict[str, Any], str], Awaitable[Any]]
# what an adapter's exception says: (dispatch state, the ToolResult of an error result or None, the error)
Classify = Callable[[BaseException], tuple[str, ToolResult | None, str | None]]


def mcp_tool_name(tool: ToolSpec) -> str:
    """The name the MCP server lists the intent's tool under (the contract's path), which the model calls."""
    return str(tool.contract["operations"][tool.kind]["path"])


def as_model_tool(tool: ToolSpec) -> ToolSpec:
    """The intent's tool as the scripted models see it through an adapter: the MCP server's name for it."""
    return replace(tool, name=mcp_tool_name(tool))


def result_of(value: Any) -> ToolResult:
    """A success as the adapter handed it back (structured content, a JSON text, or text) as a ToolResult."""
    if isinstance(value, dict):
        return ToolResult(False, value, json.dumps(value))
    text = value if isinstance(value, str) else str(value)
    try:
        return ToolResult(False, json.loads(text), text)
    except ValueError:
        return ToolResult(False, None, text)


def leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap what went wrong)."""
    seen = exc
    while isinstance(seen, BaseExceptionGroup) and seen.exceptions:
        seen = seen.exceptions[0]
    return seen


def said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


class SessionLost(Exception):
    """A call failed with nothing sent: the adapter's MCP session died with an earlier call (a lost answer
    kills FastMCP's transport, and every later call fails at once with its error). Only a new session (a new
    framework run) can reach the server again; the correct agents end the run and start another for the same
    operation."""


@dataclass
class WireCount:
    """The HTTP requests the adapter's own HTTP client sent (an httpx ``event_hooks`` request hook): a call
    that failed with none sent since it began never left the client (``not_sent``), whatever it raised."""

    sent: int = 0
    session_lost: bool = False  # a call found the session dead (SessionLost raised, whatever the run then raised)

    async def request_hook(self, request: Any) -> None:
        self.sent += 1


@dataclass
class Via:
    """One adapter call made as mcp_tools.CallTool wants it: never raises (but SessionLost when
    ``session_lost_raises``); keeps what the adapter raised (to raise it again where the adapter as shipped
    would) or returned (an error result too, for an adapter that returns it: ``read`` says so); ``wire`` says
    whether a failed call sent anything."""

    call: AdapterCall
    classify: Classify
    wire: WireCount
    read: Callable[[Any], ToolResult] = result_of  # what the adapter returned, as a ToolResult
    session_lost_raises: bool = False
    raised: BaseException | None = None
    value: Any = None

    async def __call__(self, tool: str, arguments: dict[str, Any], traceparent: str
                       ) -> tuple[str, ToolResult | None, str | None]:
        self.raised = self.value = None
        before = self.wire.sent
        try:
            self.value = await self.call(tool, arguments, traceparent)
        except Exception as exc:  # noqa: BLE001 - the adapter's failure is the attempt's outcome
            self.raised = exc
            if self.wire.sent == before:  # nothing left the client: a dead session's stored error
                if self.session_lost_raises:
                    self.wire.session_lost = True
                    raise SessionLost(said(leaf(exc.__cause__ or exc))) from exc
                return "not_sent", None, f"nothing sent: {said(leaf(exc.__cause__ or exc))}"[:200]
            return self.classify(exc)
        return "response_received", self.read(self.value), None


async def observed(tool: ToolSpec, via: Via, name: str, arguments: dict[str, Any]) -> Any:
    """The adapter as shipped, logged: the model's call sent as it is; its result or exception handed back."""
    await the_operation(tool).call_via(via, name, dict(arguments), None)
    if via.raised is not None:
        raise via.raised
    return via.value


async def reconciled(tool: ToolSpec, via: Via, arguments: dict[str, Any]) -> str:
    """The correct tool through the adapter (tools.carry_out_mcp): raises SafeToRetry when a new execution is
    safe (the caller turns it into the framework's way to ask for one), SessionLost when only a new session can
    go on."""
    via.session_lost_raises = True
    return await carry_out_mcp(via, tool, dict(arguments), the_operation(tool))
