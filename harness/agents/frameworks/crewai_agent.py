"""A crewAI agent: a one-task ``Crew`` whose ``Agent`` has one tool per intent kind, on a scripted ``BaseLLM`` (no
network, telemetry off) that answers as a ReAct model does: the intent's tool call, then the final answer.

    python -m harness.agents.frameworks.crewai_agent            # the tool raises only when a retry is safe
    python -m harness.agents.frameworks.crewai_agent --wrong    # a tool that raises on any failure

crewAI retries a tool itself, without asking the model: a tool that raises is run again at once, with the same
input, up to three times in all (``ToolUsage``: ``_max_parsing_attempts``), and only then is the error shown to
the model. A tool written as tutorials write it (raise on a bad status, a timeout) makes every lost answer, 500
and timeout a second write. The correct tool raises only SafeToRetry (the next execution looks up before it
sends) and answers anything else with "do not call again", and sends the operation's key and reference every
time. crewAI installs only beside mcp 1.x and openai 2.x: its cells run in an environment of its own.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# crewAI's telemetry and tracing would reach out to the network: none here
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task  # noqa: E402  (after the settings above, which it reads on import)
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from pydantic import BaseModel, create_model  # noqa: E402

from harness.agents.frameworks.tools import (  # noqa: E402
    ToolSpec,
    parse_mode,
    post_blindly,
    raise_only_when_safe,
    run_intents,
)


def crew_tool(spec: ToolSpec, sample: dict[str, Any], body: Any) -> BaseTool:
    """The intent kind's tool as crewAI wants one: a BaseTool whose argument schema is typed after the params."""
    scalar = (str, int, float, bool)
    fields: dict[str, Any] = {p: (type(sample[p]) if isinstance(sample[p], scalar) else Any, ...)
                              for p in spec.params}
    schema = create_model(f"{spec.name}_arguments", **fields)

    def _run(self: BaseTool, **params: Any) -> str:
        return str(body(spec, params))

    kind = type(spec.name, (BaseTool,), {"__module__": __name__, "__qualname__": spec.name,
                                         "__annotations__": {"name": str, "description": str,
                                                             "args_schema": type[BaseModel]},
                                         "name": spec.name, "description": spec.description, "args_schema": schema,
                                         "_run": _run})
    tool: BaseTool = kind()
    return tool


class ScriptedLLM(BaseLLM):
    """The intent's tool call in ReAct form first; after the tool's observation, the final answer repeating it."""

    intent: dict[str, Any]
    tool_name: str
    calls: int = 0

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> str:
        self.calls += 1
        if self.calls == 1:
            return (f"Thought: I carry out {self.intent['intent_id']} with the tool.\nAction: {self.tool_name}\n"
                    f"Action Input: {json.dumps(self.intent['params'])}")
        said = [str(m.get("content", "")) for m in messages] if isinstance(messages, list) else [str(messages)]
        seen = next((text.rsplit("Observation:", 1)[1] for text in reversed(said) if "Observation:" in text), "")
        return f"Thought: the tool answered.\nFinal Answer: {seen.strip()[:300] or 'done'}"

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        tool = crew_tool(spec, intent["params"], post_blindly if wrong else raise_only_when_safe)
        llm = ScriptedLLM(model="scripted", intent=intent, tool_name=spec.name)
        agent = Agent(role="operator", goal="carry out the request with the tool, once", backstory="an operator",
                      tools=[tool], llm=llm, max_iter=3, verbose=False)
        task = Task(description=f"carry out {intent['intent_id']}", expected_output="what the tool answered",
                    agent=agent)
        return str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff())

    run_intents(run_one)


if __name__ == "__main__":
    main(sys.argv[1:])
