"""A durable pydantic-ai agent: pydantic-ai's ``DBOSAgent`` (its model requests DBOS steps, its run a DBOS
workflow) on a ``FunctionModel`` scripted to call the write tool once per intent (no network), the tool a DBOS
step, as pydantic-ai's DBOS docs have a tool that does I/O. DBOS on a SQLite file, run as the DBOS rows are
(dbos_agent.py: the agent's process logs the operations and starts an executor again when it died).

    python -m harness.agents.durable.pydantic_ai_dbos_agent            # the tool step retried, its key derived
    python -m harness.agents.durable.pydantic_ai_dbos_agent --default  # the tool step with DBOS's defaults
    python -m harness.agents.durable.pydantic_ai_dbos_agent --wrong    # retried, a key minted by each run of it

One agent run per intent, its workflow id chosen by the agent's process (``SetWorkflowID``); the tool's step is
``send_write``, its operation and key derived from the run's workflow id as the DBOS rows' are, carried in the
run's deps. When the executor
is killed after the write committed, the restarted executor's launch recovers the agent's run: the model request
is replayed from its checkpoint, the tool step, never checkpointed, runs again. A tool step that raised after the
commit (a 500) is retried only with ``retries_allowed``; by default the exception ends the agent's run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness.agents.durable.dbos_agent import (
    STEP,
    Launched,
    main,
    operation_id_of,
    start_dbos,
    step_config,
    write_step,
)

MODULE = "harness.agents.durable.pydantic_ai_dbos_agent"
AGENT_NAME = "harness_durable_agent"  # the DBOSAgent's name: its workflows' and model steps' prefix


def scripted() -> FunctionModel:
    """The model: the write tool's call with the intent the prompt carries; after the tool's return, a final text
    repeating it (the executor reads the step's result there)."""
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        prompt = next(p for p in parts if isinstance(p, UserPromptPart))
        if len(messages) == 1:
            intent = json.loads(str(prompt.content))
            return ModelResponse(parts=[ToolCallPart(STEP, {"intent": intent}, f"call_{intent['intent_id']}_1")])
        last = parts[-1]
        return ModelResponse(parts=[TextPart(json.dumps(getattr(last, "content", None)))])

    return FunctionModel(respond)


def launch(mode: str) -> Launched:
    """DBOS, the DBOSAgent and its tool step registered, launched (the launch recovers a dead executor's runs)."""
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSAgent

    start_dbos()
    send_step = DBOS.step(name=STEP, **step_config(mode))(write_step(mode))

    def send_write(ctx: RunContext[dict[str, Any]], intent: dict[str, Any]) -> dict[str, Any]:
        """Carry out the intent on its destination."""
        return send_step(intent, ctx.deps["contract"], ctx.deps["operation_id"])

    agent = DBOSAgent(Agent(scripted(), name=AGENT_NAME, deps_type=dict, tools=[send_write]))
    DBOS.launch()

    def start(workflow_id: str, intent: dict[str, Any], contract: dict[str, Any]) -> Any:
        # the run's operation travels in its deps (a workflow input, so the recovered run has it): the tool's step
        # runs in the run's child workflow (DBOSAgent.run_sync calls its run workflow), whose id is not the run's
        deps = {"contract": contract, "operation_id": operation_id_of(workflow_id)}
        return DBOS.start_workflow(agent.dbos_wrapped_run_sync_workflow, json.dumps(intent), deps=deps)

    return Launched(start, lambda got: json.loads(str(got.output)))


if __name__ == "__main__":
    sys.exit(main(description=__doc__, module=MODULE, launcher=launch))
