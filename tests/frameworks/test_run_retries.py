"""A framework's retry of a whole run (agno's ``Agent(retries=N)``, agno#10366) or task (crewAI's
``Agent(max_retry_limit=2)``, crewAI#5802) end to end, each in the environment of its certified release: the real
framework, the real fault proxy, the real webhooks destination (no idempotency). The fault is the framework's, not
the network's: the scripted model raises a model-provider error once, on the turn after the tool's success
(``--model-error-after-tool``), and the framework runs it all again. Their rows are
tests/certification/test_framework_matrix.py's cells (the column ``model_error_after_tool``); this says why. And
crewAI's own rerun of a tool that raised (ToolUsage), named in the attempt it made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from certification.matrix import load_frameworks
from harness.results import EXPECTATION_CODE, ScenarioResult
from tests.frameworks.certified_runs import attempts, codes, run_row

COLUMNS, AGENTS = load_frameworks()
SAID = "a scripted model-provider error, raised once after the tool's result"  # what the model raises


def run(agent: str, tmp_path: Path) -> ScenarioResult:
    assert "--model-error-after-tool" in AGENTS[agent].command
    return run_row(COLUMNS["model_error_after_tool"].path, AGENTS[agent].run_command, tmp_path)


def said(result: ScenarioResult) -> str:
    """What the agent printed (agno logs its warnings to stdout, crewAI to stderr)."""
    return "".join((Path(result.evidence_dir) / f"agent.{s}").read_text(encoding="utf-8") for s in ("stdout", "stderr"))


@pytest.mark.parametrize(("wrong", "safe"), [("agno_run_retries", "agno_run_retries_safe"),
                                             ("crewai_task_retries", "crewai_task_retries_safe")])
def test_a_run_retried_whole_after_the_model_failed_runs_a_tool_that_succeeded_again(wrong: str, safe: str,
                                                                                    tmp_path: Path) -> None:
    """The tool delivered (201), the model then failed once, and the framework ran it all again: the model called
    the tool again. The blind tool delivered a second time: two answered attempts of one operation, the second
    with no retry reason the vocabulary has (H008), two deliveries (H016). The correct tool, in the same operation
    (its scope spans the framework's reruns), found it done and sent nothing: one attempt, one delivery."""
    blind = run(wrong, tmp_path / wrong)
    assert {"H008", "H016", EXPECTATION_CODE} <= codes(blind), f"{codes(blind)} ({blind.evidence_dir})"
    first, second = attempts(blind)
    assert (first["http_status"], second["http_status"]) == (201, 201), (first, second)
    assert second["retry_of_attempt_id"] == first["attempt_id"] and second.get("retry_reason") is None
    if wrong.startswith("crewai"):  # the layer that ran the tool again, in the attempt's decision
        assert "crewAI's task rerun" in second["retry_decision"], second
    assert SAID in said(blind), "the framework met the model's error and went on"
    (op,) = blind.verdict.operations
    assert len(op.effects) == 2

    correct = run(safe, tmp_path / safe)
    assert correct.passed, f"{codes(correct)} ({correct.evidence_dir})"
    (attempt,) = attempts(correct)
    assert attempt["http_status"] == 201
    assert SAID in said(correct) and "already done: dlv_0001" in said(correct)


@pytest.mark.parametrize("column", ["response_lost", "mcp_tool_result_lost"])
def test_crewais_own_rerun_of_a_tool_that_raised_is_named_in_its_attempt(column: str, tmp_path: Path) -> None:
    """crewAI's ToolUsage runs a tool that raised again at once, with the same input, before the model sees the
    error (crewAIInc/crewAI#7449): the blind tool's second attempt says that this layer made it (not the model,
    not the task's rerun), over HTTP and over MCP."""
    result = run_row(COLUMNS[column].path, AGENTS["crewai_raise_on_error"].run_command, tmp_path)
    first, second = attempts(result)
    assert second["retry_of_attempt_id"] == first["attempt_id"], (first, second)
    assert "crewAI's ToolUsage" in second["retry_decision"], second
    assert "task rerun" not in second["retry_decision"] and "by the model" not in second["retry_decision"]
