"""A crewAI agent: a one-task ``Crew`` whose ``Agent`` has one tool per intent kind, on a scripted ``BaseLLM`` (no
network, telemetry off) that answers as a ReAct model does: the intent's tool call, then the final answer.

    python -m harness.agents.frameworks.crewai_agent            # the tool raises only when a retry is safe
    python -m harness.agents.frameworks.crewai_agent --wrong    # a tool that raises on any failure
    python -m harness.agents.frameworks.crewai_agent [--wrong] --model-error-after-tool

crewAI retries a tool itself, without asking the model: a tool that raises is run again at once, with the same
input, up to three times in all (``ToolUsage``: ``_max_parsing_attempts``), and only then is the error shown to
the model. A tool written as tutorials write it (raise on a bad status, a timeout) makes every lost answer, 500
and timeout a second write. The correct tool raises only SafeToRetry (the next execution looks up before it
sends) and answers anything else with "do not call again", and sends the operation's key and reference every
time. crewAI installs only beside mcp 1.x and openai 2.x: its cells run in an environment of its own.

Each attempt after the first says which layer ran the tool again (its ``retry_decision``, ``Layers``): crewAI's
ToolUsage (no model turn since the last run of the tool: crewAIInc/crewAI#7449), crewAI's task rerun (a new
conversation), or the model calling the tool again.

crewAI also retries a task: when the agent's execution raises, ``Agent(max_retry_limit=2)`` (its default) runs the
task again, a new conversation (crewAI#5802); an exception from litellm is raised at once, any other retried. With
``--model-error-after-tool`` the scripted LLM raises once, on the turn after the tool's observation (a model
provider's 503, as a native provider's client raises it: not litellm's), and in a conversation that holds no
observation yet it calls the tool, as a model does.
"""

from __future__ import annotations

import argparse
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
    the_operation,
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


MODEL_ERROR = "the model's API answered 503 (a scripted model-provider error, raised once after the tool's result)"


class ScriptedModelError(Exception):
    """The scripted LLM's model-provider error (``--model-error-after-tool``)."""


class ScriptedLLM(BaseLLM):
    """The intent's tool call in ReAct form first; after the tool's observation, the final answer repeating it.
    With ``error_after_tool``: ScriptedModelError once, on the first turn after an observation, and the tool
    call again in a conversation that holds none (the task crewAI started again)."""

    intent: dict[str, Any]
    tool_name: str
    calls: int = 0
    conversations: int = 0  # the turns that saw no tool observation yet: each a conversation crewAI started
    error_after_tool: bool = False
    failed: bool = False

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> str:
        self.calls += 1
        said = [str(m.get("content", "")) for m in messages] if isinstance(messages, list) else [str(messages)]
        action = f"Action Input: {json.dumps(self.intent['params'])}"  # the format instructions hold "Observation:" too
        observed = any("Observation:" in text.split(action, 1)[1] for text in said if action in text)
        self.conversations += not observed
        if self.error_after_tool and observed and not self.failed:
            self.failed = True
            raise ScriptedModelError(MODEL_ERROR)
        if self.calls == 1 or (self.error_after_tool and not observed):
            return (f"Thought: I carry out {self.intent['intent_id']} with the tool.\nAction: {self.tool_name}\n"
                    f"Action Input: {json.dumps(self.intent['params'])}")
        seen = next((text.rsplit("Observation:", 1)[1] for text in reversed(said) if "Observation:" in text), "")
        return f"Thought: the tool answered.\nFinal Answer: {seen.strip()[:300] or 'done'}"

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


class Layers:
    """Which of crewAI's layers runs the tool each time, from the scripted model's count of its turns and of the
    conversations it saw: no turn since the tool's last run is ToolUsage's own rerun, a new conversation is the
    task run again, else the model called the tool again. Said in the next attempt's decision (``next_retry``)."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm
        self.last: tuple[int, int] | None = None  # (turns, conversations) at the tool's last run

    def who(self) -> str | None:
        now = (self.llm.calls, self.llm.conversations)
        last, self.last = self.last, now
        if last is None:
            return None  # the first run: no retry to attribute
        if now[0] == last[0]:
            return ("run again by crewAI's ToolUsage, at once, with the same input and no model turn between "
                    "(its own retry of a tool that raised: crewAIInc/crewAI#7449)")
        if now[1] > last[1]:
            return "run again by crewAI's task rerun (Agent max_retry_limit): a new conversation, a new tool call"
        return "run again by the model: a new tool call after the tool's answer"

    def around(self, body: Any) -> Any:
        def run(spec: ToolSpec, params: dict[str, Any]) -> str:
            said = self.who()
            if said is not None:
                the_operation(spec).next_retry(decision=said)
            return str(body(spec, params))

        return run


def main(argv: list[str] | None = None) -> None:
    args = parse_mode(argv, __doc__, extra=add_options)
    wrong = args.wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        llm = ScriptedLLM(model="scripted", intent=intent, tool_name=spec.name,
                          error_after_tool=args.model_error_after_tool)
        tool = crew_tool(spec, intent["params"], Layers(llm).around(post_blindly if wrong else raise_only_when_safe))
        agent = Agent(role="operator", goal="carry out the request with the tool, once", backstory="an operator",
                      tools=[tool], llm=llm, max_iter=3, verbose=False)
        task = Task(description=f"carry out {intent['intent_id']}", expected_output="what the tool answered",
                    agent=agent)
        return str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff())

    run_intents(run_one)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-error-after-tool", action="store_true",
                        help="the scripted LLM raises a model-provider error once, on the turn after the tool's result")


if __name__ == "__main__":
    main(sys.argv[1:])
