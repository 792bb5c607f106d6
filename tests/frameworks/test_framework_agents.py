"""The framework agents end to end (harness/agents/frameworks/): a real framework on a scripted model, its tool
calling the catalogue's destination through the real fault proxy. The correct agent passes and keeps one
operation across the framework's own retries; its --wrong twin (the framework's common retry setting) fails on
the rules that name a blind retry. The whole matrix of them is tests/certification/test_framework_matrix.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from certification.matrix import CELL_AGENT_TIMEOUT
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.results import EXPECTATION_CODE, ScenarioResult
from harness.scenario import load

AGENTS = ("langgraph_agent", "openai_agents_agent", "pydantic_ai_agent", "smolagents_agent", "agno_agent")
BLIND_RETRY = {"H010", "H016"}  # a retry after an unknown outcome with nothing to justify it; two effects


def test_the_tool_on_an_mcp_server_reconciles_through_the_lookup_tool(tmp_path: Path) -> None:
    result = run("langgraph_agent", "mcp_tool_result_lost", tmp_path)
    assert result.passed, f"{codes(result)} ({result.evidence_dir})"
    (op,) = result.verdict.operations
    assert op.state == "succeeded" and op.effects == ["ord_0001"]


def test_a_blind_retry_of_an_mcp_tool_is_caught_whatever_its_annotation_says(tmp_path: Path) -> None:
    """The tool publishes idempotentHint: true and does not deduplicate: H050 names the contradiction."""
    result = run("pydantic_ai_agent", "mcp_annotation_contradicted", tmp_path, "--wrong")
    assert not result.passed and BLIND_RETRY | {"H050"} <= codes(result), f"{codes(result)} ({result.evidence_dir})"


def run(agent: str, scenario: str, tmp_path: Path, *flags: str, agent_log: str | None = None) -> ScenarioResult:
    command = " ".join(["python -m harness.agents.frameworks." + agent, *flags])
    result = run_scenario(load(catalogue_dir() / f"{scenario}.yaml"), agent=command, evidence_root=tmp_path,
                          agent_timeout=CELL_AGENT_TIMEOUT, **({"agent_log": agent_log} if agent_log else {}))
    assert not result.incomplete, result.incomplete
    assert all(r.exit_status == 0 for r in result.agent_runs), result.agent_runs
    return result


def codes(result: ScenarioResult) -> set[str]:
    return {f.code for f in result.verdict.findings} | ({EXPECTATION_CODE} if result.expectation_failures else set())


@pytest.mark.parametrize("agent", AGENTS)
def test_the_correct_agent_looks_up_after_a_lost_answer(agent: str, tmp_path: Path) -> None:
    result = run(agent, "response_lost", tmp_path)
    assert result.passed, f"{codes(result)} ({result.evidence_dir})"
    (op,) = result.verdict.operations
    assert op.state == "succeeded" and op.effects == ["tkt_0001"] and len(op.attempts) == 1


@pytest.mark.parametrize("agent", AGENTS)
def test_the_framework_retry_is_an_attempt_of_the_same_operation_with_the_same_key(agent: str,
                                                                                   tmp_path: Path) -> None:
    """No lookup here (payments): the framework executes the tool again (LangGraph the same call, the Agents
    SDK and pydantic-ai a new call id), and the key the destination replays makes it one payment."""
    result = run(agent, "response_lost_key_replay", tmp_path)
    assert result.passed, f"{codes(result)} ({result.evidence_dir})"
    (op,) = result.verdict.operations
    assert op.effects == ["pay_0001"] and len(op.attempts) == 2


@pytest.mark.parametrize("agent", AGENTS)
def test_the_wrong_retry_setting_fails_on_the_blind_retry_rules(agent: str, tmp_path: Path) -> None:
    result = run(agent, "response_lost", tmp_path, "--wrong")
    assert not result.passed and BLIND_RETRY <= codes(result), f"{codes(result)} ({result.evidence_dir})"
    (op,) = result.verdict.operations
    assert op.effects == ["tkt_0001", "tkt_0002"] and len(op.attempts) == 2, "one operation, two effects"


def test_the_trace_only_agent_is_judged_from_its_spans(tmp_path: Path) -> None:
    """pydantic-ai --trace: no audit log, only OpenTelemetry spans (its own and the tool's), judged with
    agent_log: otel by the same rules: the correct one passes, the wrong one fails on the blind retry rules (as
    its audit-log twin does, cell for cell: tests/certification/test_framework_matrix.py)."""
    correct = run("pydantic_ai_agent", "server_error_after_commit", tmp_path, "--trace", agent_log="otel")
    assert correct.passed, f"{codes(correct)} ({correct.evidence_dir})"
    wrong = run("pydantic_ai_agent", "server_error_after_commit", tmp_path, "--trace", "--wrong", agent_log="otel")
    assert not wrong.passed and BLIND_RETRY <= codes(wrong), f"{codes(wrong)} ({wrong.evidence_dir})"


def test_the_scripted_model_streams_the_turns_it_gives(tmp_path: Path) -> None:
    """``Runner.run_streamed`` on the Agents SDK's scripted model: the same tool calls, retry included, and the
    same final output as ``Runner.run``."""
    import asyncio

    from agents import Agent, Runner, function_tool, set_tracing_disabled

    from harness.agents.frameworks.openai_agents_agent import ScriptedModel
    from harness.agents.frameworks.tools import ToolSpec, typed_function

    set_tracing_disabled(True)
    intent = {"intent_id": "int_1", "params": {"title": "t"}}
    spec = ToolSpec(name="create_ticket", kind="create_ticket", destination="tickets", contract={}, params=("title",))

    def run(streamed: bool) -> tuple[list[dict[str, object]], str]:
        calls: list[dict[str, object]] = []

        def body(tool: ToolSpec, params: dict[str, object]) -> str:
            calls.append(params)
            return "timed out. Please try again." if len(calls) == 1 else "created tkt_1"

        agent = Agent(name="operator", tools=[function_tool(typed_function(spec, intent["params"], body))],
                      model=ScriptedModel(intent, spec))

        async def go() -> str:
            if not streamed:
                return str((await Runner.run(agent, "carry out int_1", max_turns=8)).final_output)
            result = Runner.run_streamed(agent, "carry out int_1", max_turns=8)
            async for _ in result.stream_events():
                pass
            return str(result.final_output)

        return calls, asyncio.run(go())

    assert run(streamed=True) == run(streamed=False) == ([{"title": "t"}, {"title": "t"}], "created tkt_1")
