"""An OpenAI Agents SDK agent: an ``Agent`` with one function tool per intent kind, run by ``Runner`` on a
scripted ``agents.Model`` (no network, tracing off), which calls the intent's tool and follows what the tool's
output tells it, as a model does.

    python -m harness.agents.frameworks.openai_agents_agent            # a failure_error_function that asks
                                                                      # for a retry only after SafeToRetry
    python -m harness.agents.frameworks.openai_agents_agent --wrong    # the SDK's default failure_error_function

The SDK has no tool retry of its own: a tool's exception becomes its output, and the default
``failure_error_function`` says "An error occurred while running the tool. Please try again." The model
then calls the tool again, under a new call id: that is the SDK's tool retry, on every exception. The correct
agent's failure function asks for a retry only when one is safe (SafeToRetry) and says "do not retry"
otherwise, and its tool sends the operation's key and reference (not anything of the call id, which changes).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    Model,
    ModelResponse,
    ModelSettings,
    RunContextWrapper,
    Runner,
    Tool,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import (
    SafeToRetry,
    ToolSpec,
    call_id,
    carry_out,
    parse_mode,
    post_blindly,
    run_intents,
    typed_function,
)

RETRY_ASKED = "Please try again"  # what the SDK's default failure_error_function says; the model obeys it


def only_safe_retries(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """The correct agent's failure_error_function: a retry asked for only when one is safe."""
    if isinstance(error, SafeToRetry):
        return f"The tool did not finish: {error}. {RETRY_ASKED}."
    return f"The tool failed and must not be called again for this request: {type(error).__name__}: {error}"


class ScriptedModel(Model):
    """One tool call for the intent; another when the tool's output asks for a retry (at most
    MAX_EXECUTIONS calls); else a final message repeating the tool's last output."""

    def __init__(self, intent: dict[str, Any], tool: ToolSpec) -> None:
        self.intent, self.tool, self.calls = intent, tool, 0

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           model_settings: ModelSettings, tools: list[Tool], output_schema: Any,
                           handoffs: list[Any], tracing: Any, *, previous_response_id: str | None = None,
                           conversation_id: str | None = None, prompt: Any = None) -> ModelResponse:
        outputs = [item.get("output") for item in input if isinstance(item, dict)
                   and item.get("type") == "function_call_output"] if isinstance(input, list) else []
        last = str(outputs[-1]) if outputs else None
        if last is None or (RETRY_ASKED in last and self.calls < MAX_EXECUTIONS):
            self.calls += 1
            cid = call_id(self.intent, self.calls)
            call = ResponseFunctionToolCall(type="function_call", id=f"fc_{cid}", call_id=cid, name=self.tool.name,
                                            arguments=_json(self.intent["params"]), status="completed")
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        message = ResponseOutputMessage(id=f"msg_{self.intent['intent_id']}", type="message", role="assistant",
                                        status="completed",
                                        content=[ResponseOutputText(type="output_text", text=last, annotations=[])])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: str | None, input: str | list[Any],
                              model_settings: ModelSettings, tools: list[Tool], output_schema: Any,
                              handoffs: list[Any], tracing: Any, *, previous_response_id: str | None = None,
                              conversation_id: str | None = None, prompt: Any = None) -> AsyncIterator[Any]:
        """``Runner.run_streamed``'s turn: the same answer as ``get_response``, as one completed response."""
        answer = await self.get_response(system_instructions, input, model_settings, tools, output_schema, handoffs,
                                         tracing, previous_response_id=previous_response_id,
                                         conversation_id=conversation_id, prompt=prompt)
        response = Response(id=f"resp_{self.intent['intent_id']}_{self.calls}", created_at=0, model="scripted",
                            object="response", output=answer.output, parallel_tool_calls=False, tool_choice="auto",
                            tools=[])
        yield ResponseCompletedEvent(type="response.completed", sequence_number=0, response=response)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong
    set_tracing_disabled(True)  # the SDK's tracing would export to OpenAI: no network here

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        function = typed_function(spec, intent["params"], post_blindly if wrong else carry_out)
        tool = function_tool(function) if wrong else function_tool(function, failure_error_function=only_safe_retries)
        agent = Agent(name="operator", instructions="Carry out the request with the tool.", tools=[tool],
                      model=ScriptedModel(intent, spec))
        result = asyncio.run(Runner.run(agent, f"carry out {intent['intent_id']}", max_turns=2 * MAX_EXECUTIONS + 2))
        return str(result.final_output)

    run_intents(run_one)


if __name__ == "__main__":
    main(sys.argv[1:])
