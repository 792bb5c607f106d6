"""A smolagents agent: a ``ToolCallingAgent`` with one ``Tool`` per intent kind, on a scripted ``Model`` (no
network) that calls the intent's tool and follows what the framework tells it, as a model does.

    python -m harness.agents.frameworks.smolagents_agent            # the tool raises only when a retry is safe
    python -m harness.agents.frameworks.smolagents_agent --wrong    # a tool that raises on any failure

smolagents retries a tool through the model: a tool's exception becomes the step's observation, "Error executing
tool ...: <error>. Please try again or use another tool", and the model calls it again under a new call id, as
many times as ``max_steps`` allows. A tool written as tutorials write it (raise on a bad status, a timeout) makes
every lost answer, 500 and timeout a second write. The correct tool raises only SafeToRetry (the next execution
looks up before it sends) and answers anything else with "do not call again", and sends the operation's key and
reference every time.
"""

from __future__ import annotations

import sys
from typing import Any

from smolagents import Tool, ToolCallingAgent
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import (
    ToolSpec,
    call_id,
    parse_mode,
    post_blindly,
    raise_only_when_safe,
    run_intents,
)

RETRY_ASKED = "Please try again"  # what smolagents tells the model after a tool's exception; the model obeys it
INPUT_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}


def smol_tool(spec: ToolSpec, sample: dict[str, Any], body: Any) -> Tool:
    """The intent kind's tool as smolagents wants one: a Tool with its inputs typed after an intent's params."""

    def forward(self: Tool, **params: Any) -> str:
        return str(body(spec, params))

    inputs = {p: {"type": INPUT_TYPES.get(type(sample[p]), "any"), "description": p} for p in spec.params}
    kind = type(spec.name, (Tool,), {"name": spec.name, "description": spec.description, "inputs": inputs,
                                     "output_type": "string", "forward": forward,
                                     "skip_forward_signature_validation": True})  # forward takes **params
    tool: Tool = kind()
    return tool


class ScriptedModel(Model):
    """One tool call for the intent; another when the last observation asks for a retry (at most MAX_EXECUTIONS
    calls); else the final answer, repeating the tool's last output."""

    def __init__(self, intent: dict[str, Any], tool: ToolSpec) -> None:
        super().__init__(model_id="scripted")
        self.intent, self.tool, self.calls = intent, tool, 0

    def generate(self, messages: list[ChatMessage], stop_sequences: list[str] | None = None,
                 response_format: dict[str, str] | None = None, tools_to_call_from: list[Tool] | None = None,
                 **kwargs: Any) -> ChatMessage:
        last = _text(messages[-1]) if messages and messages[-1].role == MessageRole.TOOL_RESPONSE else None
        if last is None and self.calls == 0 or (last and RETRY_ASKED in last and self.calls < MAX_EXECUTIONS):
            self.calls += 1
            function = ChatMessageToolCallFunction(arguments=dict(self.intent["params"]), name=self.tool.name)
        else:
            function = ChatMessageToolCallFunction(arguments={"answer": last or "done"}, name="final_answer")
        call = ChatMessageToolCall(function=function, id=call_id(self.intent, self.calls), type="function")
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def _text(message: ChatMessage) -> str:
    content = message.content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        tool = smol_tool(spec, intent["params"], post_blindly if wrong else raise_only_when_safe)
        agent = ToolCallingAgent(tools=[tool], model=ScriptedModel(intent, spec), max_steps=MAX_EXECUTIONS + 1,
                                 verbosity_level=0)
        return str(agent.run(f"carry out {intent['intent_id']}"))

    run_intents(run_one)


if __name__ == "__main__":
    main(sys.argv[1:])
