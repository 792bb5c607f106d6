"""A pydantic-ai agent: an ``Agent`` on a ``FunctionModel`` (scripted: one tool call per intent, another when
pydantic-ai sends it a retry prompt; no network), one tool per intent kind.

    python -m harness.agents.frameworks.pydantic_ai_agent            # ModelRetry only for SafeToRetry
    python -m harness.agents.frameworks.pydantic_ai_agent --wrong    # ModelRetry on any exception, max_retries=2
    python -m harness.agents.frameworks.pydantic_ai_agent --trace [--wrong]   # OpenTelemetry spans only

With ``--trace`` the agent writes no audit log: pydantic-ai's own spans (its ``Instrumentation`` capability,
what ``instrument=True`` was) and the tool's
HTTP client and lookup spans (traced.py) go to HARNESS_TRACE_FILE, judged with ``agent_log: otel``.

pydantic-ai retries a tool through the model: a tool that raises ``ModelRetry`` sends the model a retry
prompt (1.x: a ``RetryPromptPart``, "Fix the errors and try again."; 2.x: a ``ToolReturnPart`` whose outcome is
``retried``), and the model calls the tool again under a new call
id, up to the tool's ``max_retries``. The pattern teams write, ``except Exception as e: raise ModelRetry(str(e))``,
makes every lost answer, 500 and timeout a second write. The correct agent raises ModelRetry only when a new
execution is safe (SafeToRetry), and its tool sends the operation's key and reference every time.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic_ai import Agent, ModelRetry, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import (
    Rejected,
    SafeToRetry,
    ToolSpec,
    call_id,
    carry_out,
    parse_mode,
    post_blindly,
    run_intents,
    typed_function,
)


def retried_on_any_error(tool: ToolSpec, params: dict[str, Any]) -> str:
    """--wrong: the blind tool, and every exception handed back to the model as ModelRetry."""
    try:
        return post_blindly(tool, params)
    except Exception as exc:  # noqa: BLE001 - the mistake this agent shows
        raise ModelRetry(f"{type(exc).__name__}: {exc}") from exc


def retried_when_safe(tool: ToolSpec, params: dict[str, Any]) -> str:
    """The correct tool; ModelRetry only when a new execution is safe, a refusal said to the model."""
    try:
        return carry_out(tool, params)
    except SafeToRetry as exc:
        raise ModelRetry(str(exc)) from exc
    except Rejected as exc:
        return f"refused, not to be retried: {exc}"


def scripted(intent: dict[str, Any], tool: ToolSpec) -> FunctionModel:
    """The model: the intent's tool call first; another after a retry prompt; after the tool's return, a
    final text repeating it."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        calls = sum(isinstance(p, ToolCallPart) for m in messages if isinstance(m, ModelResponse) for p in m.parts)
        last = parts[-1] if parts else None
        # a retry prompt: 1.x sends a RetryPromptPart, 2.x a ToolReturnPart whose outcome is "retried"
        if calls == 0 or isinstance(last, RetryPromptPart) or getattr(last, "outcome", None) == "retried":
            return ModelResponse(parts=[ToolCallPart(tool.name, dict(intent["params"]), call_id(intent, calls + 1))])
        return ModelResponse(parts=[TextPart(str(last.content) if isinstance(last, ToolReturnPart) else "done")])

    return FunctionModel(respond)


def main(argv: list[str] | None = None) -> None:
    args = parse_mode(argv, __doc__, trace=True)

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        function = typed_function(spec, intent["params"], retried_on_any_error if args.wrong else retried_when_safe)
        # Instrumentation (pydantic-ai's OpenTelemetry capability, formerly instrument=True): its own spans (the
        # run, each model request, each tool execution) go to the global tracer provider, the trace file's
        capabilities = [Instrumentation()] if args.trace else []
        agent = Agent(scripted(intent, spec), tools=[Tool(function, max_retries=MAX_EXECUTIONS - 1)],
                      capabilities=capabilities)
        return str(agent.run_sync(f"carry out {intent['intent_id']}").output)

    run_intents(run_one, trace=args.trace)


if __name__ == "__main__":
    main(sys.argv[1:])
