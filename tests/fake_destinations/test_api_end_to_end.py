"""A generic destination behind the real proxy, judged by the real checker: the reference agent, which
reads only the contract, passes against the bundled `orders` profile; wrong agents fail on their rules.
(The real SDKs against their profiles: the certification matrix, tests/certification.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.scenario import load

SCENARIOS = Path(__file__).resolve().parents[1] / "engine" / "scenarios"


def codes(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in result.verdict.findings}


def test_the_reference_agent_passes_response_lost_against_the_generic_orders_api(tmp_path: Path) -> None:
    result = run_scenario(load(SCENARIOS / "orders_response_lost.yaml"), evidence_root=tmp_path)
    assert result.passed, result.verdict.findings
    (op,) = result.verdict.operations
    assert op.state == "succeeded" and op.effects == ["ord_0001"]
    assert [a.dispatch_state for a in op.attempts][0] == "sent_no_response"


@pytest.mark.parametrize("agent, expected", [
    ("new_key_per_attempt", {"H002", "H016"}),  # a second order: the destination deduplicated nothing
    ("lost_response_as_not_sent", {"H005", "H007"}),
])
def test_wrong_agents_fail_against_the_generic_api_on_their_rules(tmp_path: Path, agent: str,
                                                                   expected: set[str]) -> None:
    result = run_scenario(load(SCENARIOS / "orders_response_lost.yaml"),
                          agent=f"python -m harness.agents.wrong.{agent}", evidence_root=tmp_path)
    assert not result.passed
    assert expected <= codes(result), codes(result)
