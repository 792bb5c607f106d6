"""A scenario's own expectations are part of the verdict: each failure is an X001 finding with the
evidence that contradicts it, so no verdict reads PASSED beside a failed expectation."""

from __future__ import annotations

import json

from harness.checker.expectations import expectation_failures, expectation_findings
from harness.report import render_check, render_text
from harness.results import AgentRun, ScenarioResult
from tests.common.evidence_builder import EvidenceBuilder, reference_lookup_run

RUN_OK = [AgentRun("agent", 0, False, False, 1.0)]


def judged(tmp_path, expect):
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)
    verdict = b.check()
    assert verdict.passed
    return verdict, b.effects


def test_a_state_the_scenario_does_not_expect_cites_the_resolution_and_the_ledger(tmp_path):
    expect = {"states": {"int_1": ["failed"]}, "effects": {}}
    verdict, effects = judged(tmp_path, expect)
    [finding] = expectation_findings(expect, verdict, RUN_OK, effects)
    assert (finding.code, finding.rule, finding.operation_id) == ("X001", "scenario-expectation", "op_1")
    assert "intent int_1 ended succeeded (op_1; the destination holds tkt_1 for it)" in finding.message
    assert finding.evidence[0] == {"source": "log", "line": 4, "event": "resolution", "state": "succeeded"}
    assert finding.evidence[1]["source"] == "ledger" and finding.evidence[1]["effect_ref"] == "tkt_1"
    assert expectation_failures(expect, verdict, RUN_OK, effects) == [finding.message]


def test_an_effect_count_cites_the_ledger_rows_and_the_verdict_fails(tmp_path):
    expect = {"states": {}, "effects": {"tickets": 2}}
    verdict, effects = judged(tmp_path, expect)
    unmet = expectation_findings(expect, verdict, RUN_OK, effects)
    verdict.add_findings(unmet)
    assert not verdict.passed and verdict.rules_passed
    assert [e["seq"] for e in unmet[0].evidence] == [1]
    text = render_text(verdict)
    assert "verdict: FAILED (1 operation(s), 1 finding(s), 1 of them the scenario's own expectations (X001))" in text
    assert "FAIL X001 scenario-expectation: destination tickets holds 1 distinct effect(s) ['tkt_1']; expected 2" \
        in text
    assert "ledger effects seq 1: effect tkt_1" in text
    assert render_check(verdict, [f.message for f in unmet]).count("holds 1 distinct") == 1


def test_an_exit_status_is_no_expectation_of_the_scenario(tmp_path):
    """A non-zero exit is the contract's rule (H063, tests/checker/test_exit_status.py), not an X001."""
    expect = {"states": {}, "effects": {}, "agent_timeout_seconds": 30}
    verdict, effects = judged(tmp_path, expect)
    assert expectation_findings(expect, verdict, [AgentRun("agent", 3, False, False, 0.5)], effects) == []


def test_an_agent_stopped_at_its_time_limit_is_an_x001_naming_its_run(tmp_path):
    expect = {"states": {}, "effects": {}, "agent_timeout_seconds": 30}
    verdict, effects = judged(tmp_path, expect)
    [finding] = expectation_findings(expect, verdict, [AgentRun("agent", None, True, True, 30.0)], effects)
    assert "did not finish within 30 s" in finding.message and finding.evidence[0]["timed_out"] is True


def test_a_verdict_file_from_before_x001_findings_still_fails_its_verdict(tmp_path):
    """An older verdict.json: expectation failures as sentences, verdict_passed true. Read back, the
    verdict holds them as X001 findings (without evidence), so it renders FAILED."""
    verdict, _ = judged(tmp_path, {})
    data = {"scenario": "s", "agent": "a", "passed": False, "expectation_failures": ["destination tickets holds 1 "
            "distinct effect(s) ['tkt_1']; expected 2"], "evidence_dir": str(tmp_path), "agent_runs": [],
            **{k: v for k, v in verdict.to_dict().items() if k != "passed"}, "verdict_passed": True}
    result = ScenarioResult.from_dict(json.loads(json.dumps(data)))
    assert not result.verdict.passed and result.verdict.codes == {"X001"}
    again = ScenarioResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert len(again.verdict.findings) == 1 and again.to_dict()["verdict_passed"] is False
    assert again.to_dict()["rules_passed"] is True
