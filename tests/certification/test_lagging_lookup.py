"""A safe row whose lookup finds nothing leaves the retry to its key. In the matrix's cells langgraph_js_safe's lookup
always finds the order that a lost answer or a 500 left, so LangGraph.js's RetryPolicy never runs the node again after
an unknown outcome there; here the orders API's lookup lags 30 s behind its commits (the scenarios of the matrix, one
setting added), so the policy's retry is the only way on: it must carry the same key (the API replays the first
result: one order), and an outcome still unknown when the attempts are spent is told to the caller as unknown, not
failed (H049 otherwise: the API replays the stored 500 for the key while the order exists). Real Node, LangGraph.js,
fault proxy and destination, judged black-box as the matrix's cells are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from certification.matrix import CELL_AGENT_TIMEOUT, SCENARIOS_DIR, load_expected

LAG_SECONDS = 30  # past the agent's whole run: every lookup finds nothing


def lagging(fault: str, folder: Path) -> Path:
    """The matrix's orders scenario of ``fault`` with the lookup lagging behind the commits."""
    scenario = yaml.safe_load((SCENARIOS_DIR / f"orders_{fault}.yaml").read_text(encoding="utf-8"))
    scenario["name"] += "_lagging_lookup"
    scenario["destinations"]["orders"]["lookup_lag_seconds"] = LAG_SECONDS
    path = folder / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("fault, attempts, told", [
    ("response_lost", 2, {"outcome": "success", "effect_ref": "ord_0001"}),  # the retry's answer: the first, replayed
    ("server_error_after_commit", 3, {"outcome": "unknown"}),  # the stored 500 replayed on every attempt
])
def test_the_policys_retry_after_an_unknown_outcome_carries_the_key(fault: str, attempts: int, told: dict[str, str],
                                                                    tmp_path: Path) -> None:
    from harness.engine import run_scenario
    from harness.scenario import load

    connector = load_expected()["langgraph_js_safe"].ready()
    result = run_scenario(load(lagging(fault, tmp_path)), agent=connector.command, evidence_root=tmp_path / "evidence",
                          keep_evidence="always", black_box=True, agent_timeout=CELL_AGENT_TIMEOUT)
    assert result.passed, [f.code for f in result.verdict.findings]
    assert (result.facts["effects"], result.facts["attempts"]) == (1, attempts)
    assert result.facts["key_behaviour"] == f"one key on {attempts} attempts"
    stdout = (result.evidence_dir / "agent.stdout").read_text(encoding="utf-8")
    assert stdout.count("Retrying task \"place_order\"") == attempts - 1, stdout  # LangGraph.js's policy retried
    reports = [json.loads(line.removeprefix("harness-report: ")) for line in stdout.splitlines()
               if line.startswith("harness-report: ")]
    assert reports == [{"intent_id": "order-2001", **told}], stdout
