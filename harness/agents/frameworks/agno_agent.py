"""An agno agent: an ``Agent`` with one tool per intent kind, on a scripted ``Model`` (no network) that calls the
intent's tool and follows what the framework tells it, as a model does.

    python -m harness.agents.frameworks.agno_agent            # RetryAgentRun only when a retry is safe
    python -m harness.agents.frameworks.agno_agent --wrong    # RetryAgentRun on any failure
    python -m harness.agents.frameworks.agno_agent [--wrong] --retries 2 --model-error-after-tool

agno has two retry layers. A tool that raises ``RetryAgentRun`` hands its message to the model, which calls the
tool again under a new call id (agno's documented way to ask for one); ``Agent(retries=N)`` runs the whole run
again when it fails, tool calls included (agno#10366). A tool that raises ``RetryAgentRun`` on every failure, as
"retry on error" is written, makes every lost answer, 500 and timeout a second write. The correct tool asks for a
retry only when one is safe (SafeToRetry: the next execution looks up before it sends) and tells the model not to
call again otherwise; it sends the operation's key and reference every time.

A run fails only when the model does (a plain exception in a tool is the tool's result), so ``Agent(retries=N)``
is exercised by a fault of the framework's, not the network's: with ``--model-error-after-tool`` the scripted
model raises agno's ``ModelProviderError`` (a 503 from the model's API) once, on the turn after the tool's
result, and ``--retries N`` gives the agent ``retries=N``. agno then runs the whole run again: a new message list,
in which the model, as a model does, calls the tool again. The blind tool (``--wrong``) sends again; the correct
one, in the same operation (the scope spans agno's reruns), finds it done and sends nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

from agno.agent import Agent
from agno.exceptions import ModelProviderError, RetryAgentRun
from agno.models.base import Model
from agno.models.response import ModelResponse

from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.frameworks.tools import (
    SafeToRetry,
    ToolSpec,
    call_id,
    parse_mode,
    post_blindly,
    raise_only_when_safe,
    run_intents,
    typed_function,
)

RETRY_ASKED = "Please try again"  # what the tools below tell the model with RetryAgentRun; the model obeys it


def retry_on_any_failure(tool: ToolSpec, params: dict[str, Any]) -> str:
    """--wrong: the blind tool, and every failure handed back to the model as a retry."""
    try:
        return post_blindly(tool, params)
    except Exception as exc:  # noqa: BLE001 - the mistake this agent shows
        raise RetryAgentRun(exc, user_message=f"The tool failed: {exc}. {RETRY_ASKED}.") from exc


def retry_when_safe(tool: ToolSpec, params: dict[str, Any]) -> str:
    """The correct tool: a retry asked for only when one is safe; anything else said, never retried."""
    try:
        return raise_only_when_safe(tool, params)
    except SafeToRetry as exc:
        raise RetryAgentRun(exc, user_message=f"The tool did not finish: {exc}. {RETRY_ASKED}.") from exc


MODEL_ERROR = "the model's API answered 503 (a scripted model-provider error, raised once after the tool's result)"


class ScriptedModel(Model):
    """One tool call for the intent; another when the last message asks for a retry (at most MAX_EXECUTIONS
    calls); else a final answer repeating the tool's last output. With ``error_after_tool``: ModelProviderError
    once, on the first turn that follows a tool's result, and the tool called again in a conversation that holds
    no tool result yet (the run agno started again)."""

    def __init__(self, intent: dict[str, Any], tool: ToolSpec, *, error_after_tool: bool = False) -> None:
        super().__init__(id="scripted", name="scripted", provider="retry-harness")
        self.intent, self.tool, self.calls = intent, tool, 0
        self.error_after_tool = self.rerun = error_after_tool

    def _answer(self, messages: list[Any]) -> ModelResponse:
        last = str(messages[-1].content) if messages else ""
        answered = any(getattr(m, "role", None) == "tool" for m in messages)
        if self.error_after_tool and answered:
            self.error_after_tool = False
            raise ModelProviderError(MODEL_ERROR, status_code=503, model_name="scripted", model_id="scripted")
        if self.calls == 0 or ((RETRY_ASKED in last or (self.rerun and not answered)) and self.calls < MAX_EXECUTIONS):
            self.calls += 1
            call = {"id": call_id(self.intent, self.calls), "type": "function",
                    "function": {"name": self.tool.name, "arguments": json.dumps(self.intent["params"])}}
            return ModelResponse(role="assistant", content="", tool_calls=[call])
        return ModelResponse(role="assistant", content=last)

    def invoke(self, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    async def ainvoke(self, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    def invoke_stream(self, messages: list[Any], *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._answer(messages)

    async def ainvoke_stream(self, messages: list[Any], *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._answer(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # _answer gives a ModelResponse already

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


def main(argv: list[str] | None = None) -> None:
    args = parse_mode(argv, __doc__, extra=add_options)
    wrong = args.wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        function = typed_function(spec, intent["params"], retry_on_any_failure if wrong else retry_when_safe)
        model = ScriptedModel(intent, spec, error_after_tool=args.model_error_after_tool)
        agent = Agent(model=model, tools=[function], telemetry=False, retries=args.retries)
        return str(agent.run(f"carry out {intent['intent_id']}").content)

    run_intents(run_one)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retries", type=int, default=0, metavar="N",
                        help="Agent(retries=N): a failed run is run again whole, its tool calls too (default 0)")
    parser.add_argument("--model-error-after-tool", action="store_true",
                        help="the scripted model raises ModelProviderError once, on the turn after the tool's result")


if __name__ == "__main__":
    main(sys.argv[1:])
