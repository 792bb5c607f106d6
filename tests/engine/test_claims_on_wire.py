"""The claims table (harness/checker/claims.py) through the real engine: each row's check caught on a wrong agent
that makes its flaw (harness/agents/wrong/), and held on the reference agent in the same scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load

SCENARIOS = Path(__file__).parent / "scenarios"
WRONG = "python -m harness.agents.wrong."

# the claim, its wrong agent, the scenario that exposes it, the rule that names the flaw
ROWS = [
    ("dispatch state", "answer_delivered_logged_lost", "two_intents_one_run", "H028"),
    ("declared before dispatch", "declares_between_send_and_log", "response_lost", "H070"),
    ("one attempt at a time", "hedges_before_the_answer", "timeout_late_success", "H071"),
    ("observations", "confirms_without_reading", "two_intents_one_run", "H072"),
    ("idempotency key", "key_where_not_read", "response_lost_key_replay", "H073"),
    # no catalogue scenario has a host whose command answers with a non-zero exit: a test's own agent and scenario
    ("SSH exit status", "tests.common.wrong_agents.exit_status_assumed", "ssh_create_user_fails", "H074"),
    ("one decider", "owner_also_resolves", "delegated_worker", "H020"),
    ("superseded payload", "supersedes_same_payload", "response_lost", "H075"),
]


def run(scenario: str, tmp_path: Path, agent: str | None = None):
    path = SCENARIOS / f"{scenario}.yaml"
    return run_scenario(load(path if path.exists() else catalogue_dir() / f"{scenario}.yaml"), agent=agent,
                        evidence_root=tmp_path)


@pytest.mark.parametrize("claim, agent, scenario, code", ROWS, ids=[r[0] for r in ROWS])
def test_the_wrong_agent_is_caught_on_the_rule_that_names_its_flaw(tmp_path: Path, claim: str, agent: str,
                                                                   scenario: str, code: str) -> None:
    result = run(scenario, tmp_path, f"python -m {agent}" if "." in agent else WRONG + agent)
    assert code in {f.code for f in result.verdict.findings}, render_result(result)


@pytest.mark.parametrize("scenario, code", sorted({(s, c) for _, _, s, c in ROWS}))
def test_the_reference_agent_holds_the_same_check(tmp_path: Path, scenario: str, code: str) -> None:
    result = run(scenario, tmp_path)
    assert result.passed, render_result(result)
    from harness.checker import RULES

    label = RULES[code].label
    assert result.verdict.checks.get(label) in ("held", "not exercised"), result.verdict.checks
