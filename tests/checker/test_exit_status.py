"""H063 (H048 in black-box mode): the agent exits 0 once its work is done, whatever the outcomes (contract,
section 1). Judged from the harness's record of the agent's runs (context.json), the last run only: a planned
crash's killed run has no status of its own, and a run stopped at the time limit is the scenario's X001."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checker import judge
from harness.evidence import load_evidence
from harness.results import AgentRun
from tests.common.evidence_builder import EvidenceBuilder, codes, reference_lookup_run

EXPECT = {"states": {"int_1": ["succeeded"]}, "effects": {"tickets": 1}, "agent_timeout_seconds": 30}


def run(status: int | None, *, timed_out: bool = False, killed: bool = False) -> dict[str, Any]:
    return AgentRun("agent", status, timed_out, killed, 0.5).__dict__


def story(tmp_path, runs: list[dict[str, Any]], stderr: str = "") -> EvidenceBuilder:
    b = reference_lookup_run(EvidenceBuilder(tmp_path / "evidence"))
    b.context["agent"]["runs"] = runs
    b.context["expect"] = EXPECT
    b.write()
    (b.folder / "agent.stderr").write_text(stderr)
    return b


def test_a_non_zero_exit_after_the_work_is_h063_naming_the_run_and_its_stderr(tmp_path):
    b = story(tmp_path, [run(1)], stderr="1 operation(s) ended unknown\n")
    judged = judge(load_evidence(b.folder))
    [finding] = judged.verdict.findings
    assert (finding.code, finding.rule, finding.operation_id) == ("H063", "exits-zero", None)
    assert finding.message.startswith("the agent exited with status 1 (the contract asks for 0 once its work is "
                                      "done, whatever the outcomes); its stderr ends: 1 operation(s) ended unknown")
    assert finding.evidence[0] == {"source": "context", "agent_run": 1, "exit_status": 1, "timed_out": False,
                                   "seconds": 0.5}
    assert judged.expectation_failures == [] and not judged.passed  # the rule's, not the scenario's


@pytest.mark.parametrize("runs", [
    [run(0)],
    [run(None, killed=True), run(0)],  # a planned crash: the killed run is not judged on its status
    [run(-9, killed=True), run(0)],
], ids=["zero", "crash-no-status", "crash-signal-status"])
def test_an_exit_0_passes_and_a_planned_crash_is_not_judged_on_its_status(tmp_path, runs):
    judged = judge(load_evidence(story(tmp_path, runs).folder))
    assert judged.passed and "H063 exits-zero" in judged.verdict.checks, judged.verdict.findings


def test_a_run_stopped_at_the_time_limit_is_the_scenario_s_x001_not_h063(tmp_path):
    judged = judge(load_evidence(story(tmp_path, [run(None, timed_out=True, killed=True)]).folder))
    assert codes(judged.verdict) == {"X001"} and "did not finish within 30 s" in judged.expectation_failures[0]


def test_black_box_mode_judges_the_exit_as_h048(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence").black_box()
    b.intent()
    b.request(effect="tkt_1")
    b.context["agent"]["runs"] = [run(2)]
    verdict = b.check()
    assert codes(verdict) == {"H048"} and "exited with status 2" in verdict.by_code("H048")[0].message
    b.context["agent"]["runs"] = [run(0)]
    assert b.check().passed
