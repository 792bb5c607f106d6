"""Behaviour docs/contract.md documents as correct passes through the real engine, each beside a wrong
agent that the same check still fails (issue 43, goal 2: no false FAIL of a correct agent)."""

from __future__ import annotations

from pathlib import Path

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load

SCENARIOS = Path(__file__).parent / "scenarios"
RIGHT = "python -m tests.common.right_agents."
WRONG = "python -m harness.agents.wrong."


def run(scenario: str, tmp_path: Path, agent: str | None = None):
    path = SCENARIOS / f"{scenario}.yaml"
    return run_scenario(load(path if path.exists() else catalogue_dir() / f"{scenario}.yaml"), agent=agent,
                        evidence_root=tmp_path)


def passes(scenario: str, tmp_path: Path, agent: str | None = None):
    """The run passes; its one operation, to say how."""
    result = run(scenario, tmp_path, agent)
    assert result.passed, render_result(result)
    [op] = result.verdict.operations
    return op


def fails(scenario: str, tmp_path: Path, agent: str, wanted: set[str]) -> None:
    """The run fails, on (at least) the rules that name the flaw."""
    result = run(scenario, tmp_path, agent)
    assert not result.passed and wanted <= {f.code for f in result.verdict.findings}, render_result(result)


# -- a retry under the same key after an MCP error result: destination_5xx, the tool's 5xx (section 7)
def test_a_keyed_retry_after_an_mcp_error_result_passes(tmp_path: Path) -> None:
    op = passes("mcp_tool_error_keyed", tmp_path)  # the reference agent: no lookup tool, the key argument
    [_, retry] = op.attempts
    assert retry.retry_reason == "destination_5xx" and op.state == "succeeded" and len(op.effects) == 1


def test_a_retry_under_a_fresh_key_after_an_mcp_error_result_fails(tmp_path: Path) -> None:
    fails("mcp_tool_error_keyed", tmp_path, WRONG + "new_key_per_attempt", {"H002", "H010"})


# -- a set_state rerun after a lost exit status, closed on the convergence exit (section 4, "Command families")
def test_a_set_state_rerun_closed_on_its_convergence_passes(tmp_path: Path) -> None:
    op = passes("ssh_create_user_dropped", tmp_path, RIGHT + "convergence_rerun")
    assert [a.dispatch_state for a in op.attempts] == ["sent_no_response", "response_received"]
    assert [row.get("status") for a in op.attempts for row in a.destination_saw] == [0, 9], op.attempts
    assert op.state == "succeeded" and op.effects == ["user:deployer"]


def test_a_rerun_of_a_command_that_declares_no_convergence_fails(tmp_path: Path) -> None:
    fails("ssh_append_dropped", tmp_path, WRONG + "assumes_convergence", {"H010", "H035"})


# -- an operator-approved rerun of a destructive command: the second effect is intended (section 8)
def test_an_approved_rerun_closed_on_its_approval_passes(tmp_path: Path) -> None:
    op = passes("ssh_restart_dropped", tmp_path, RIGHT + "approved_rerun")
    assert op.state == "succeeded" and op.effects == ["restart:api:1", "restart:api:2"]


def test_the_reference_agent_without_an_operator_still_leaves_it_unknown(tmp_path: Path) -> None:
    op = passes("ssh_restart_dropped", tmp_path)
    assert op.state == "unknown" and op.effects == ["restart:api:1"]


def test_a_rerun_on_a_generic_approval_is_still_a_duplicate(tmp_path: Path) -> None:
    fails("ssh_restart_dropped", tmp_path, WRONG + "rerun_on_generic_approval", {"H016", "H036"})


# -- harness.instrument records the key the agent sends; it declares none the agent did not give (docs/instrument.md)
def test_an_instrumented_agent_keeping_its_own_stable_key_passes(tmp_path: Path) -> None:
    op = passes("response_lost_key_replay", tmp_path, RIGHT + "instrumented_own_key")
    [key] = {a.key for a in op.attempts}
    assert len(op.attempts) == 2 and not key.startswith("idem_")  # its own uuid, on both attempts


def test_an_instrumented_agent_minting_a_key_per_attempt_fails(tmp_path: Path) -> None:
    fails("response_lost_key_replay", tmp_path, "python -m harness.agents.instrumented.wrong_fresh_key", {"H002"})
