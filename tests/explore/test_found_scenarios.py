"""What exploration found in the reference agent and the checker, kept as scenarios (tests/explore/found/,
in the explorer's own format): each was a failure of a correct agent, fixed in the agent or the checker.
The reference agent passes every one, run through the real engine; where a fix made a rule more lenient,
a wrong agent still trips it on the same schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.scenario import load

FOUND = Path(__file__).parent / "found"
WRONG = "python -m harness.agents.wrong.{}"


@pytest.mark.parametrize("path", sorted(FOUND.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_reference_agent_passes_what_exploration_once_failed_it_on(path: Path, tmp_path: Path) -> None:
    scenario = load(path)
    assert scenario.expect.states == {} and scenario.expect.effects == {}  # the rules decide
    result = run_scenario(scenario, evidence_root=tmp_path)
    assert result.passed, (sorted(result.verdict.codes), result.incomplete, str(result.evidence_dir))


@pytest.mark.parametrize("scenario, agent, codes", [
    # H016 lets through a duplicate only the network made where no key could prevent it: not a keyless agent's
    ("network_duplicate_with_dedup", "timeout_as_failed", {"H016"}),
    # (H027, now dated by the ledger's commit: lookup_by_intent_id on response_lost, the matrix's cell)
])
def test_a_wrong_agent_still_trips_the_rule_a_fix_made_more_careful(scenario: str, agent: str, codes: set[str],
                                                                      tmp_path: Path) -> None:
    result = run_scenario(load(FOUND / f"{scenario}.yaml"), agent=WRONG.format(agent), evidence_root=tmp_path)
    assert not result.passed and codes <= result.verdict.codes, (sorted(result.verdict.codes), str(result.evidence_dir))
