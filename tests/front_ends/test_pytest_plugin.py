"""`pytest --scenario response_lost` end to end, through the real destination, proxy and agent.

Each run is a real pytest subprocess (pytester), as a user or CI would start it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.resources import catalogue_dir

WRONG = "python -m harness.agents.wrong."


def verdict_files(evidence: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(evidence.glob("*/verdict.json"))]


def test_help_lists_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*retry-harness*", "*--scenario=NAME*", "*--agent=COMMAND*",
                                 "*--evidence-dir=DIR*"])


def test_unknown_scenario_is_a_usage_error_with_suggestions(run_plugin) -> None:
    result = run_plugin("--scenario", "response_lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no scenario 'response_lots'*Did you mean 'response_lost'?*"])


def test_reference_agent_passes_and_shows_its_verdict(run_plugin) -> None:
    result = run_plugin("--scenario", "response_lost", "-v")  # passing verdicts in full: -v or -rA
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*retry-harness verdicts*", "*scenario response_lost*PASS*",
                                 "*sent_no_response*"])
    [verdict] = verdict_files(result.evidence_dir)
    assert verdict["passed"] is True
    [op] = verdict["operations"]
    assert op["classification"] == "healthy" and op["state"] == "succeeded"
    evidence = next(result.evidence_dir.iterdir())
    for name in ("agent.ndjson", "journal.ndjson", "ledger.json", "context.json", "verdict.json"):
        assert (evidence / name).is_file(), name


@pytest.mark.parametrize("agent, codes", [
    ("new_key_per_attempt", ["H002", "H016"]),
    ("timeout_as_failed", ["H005", "H016"]),
    ("idle", ["H021"]),
    ("forger", ["H018"]),
])
def test_wrong_agents_fail_on_the_rules_that_name_their_flaw(run_plugin, agent: str, codes: list[str]) -> None:
    result = run_plugin("--scenario", "response_lost", "--agent", WRONG + agent)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for code in codes:
        assert code in out, f"{agent}: expected finding {code} in\n{out}"
    assert "evidence: " in out
    [verdict] = verdict_files(result.evidence_dir)
    found = {f["code"] for f in verdict["findings"]}
    assert set(codes) <= found


def test_new_key_agent_failure_names_keys_attempts_and_effects(run_plugin) -> None:
    result = run_plugin("--scenario", "response_lost", "--agent", WRONG + "new_key_per_attempt")
    out = result.stdout.str()
    assert "att_" in out and "key_" in out and "tkt_" in out
    assert "the destination committed 2 effect(s) (tkt_0001, tkt_0002) for 1 intent" in out


def test_keep_evidence_failed_drops_passing_runs_and_keeps_failing_ones(run_plugin) -> None:
    passed = run_plugin("--scenario", "response_lost", "--keep-evidence", "failed")
    passed.assert_outcomes(passed=1)
    assert list(passed.evidence_dir.iterdir()) == []
    failed = run_plugin("--scenario", "response_lost", "--keep-evidence", "failed",
                        "--agent", WRONG + "idle")
    failed.assert_outcomes(failed=1)
    assert len(verdict_files(failed.evidence_dir)) == 1


def test_results_cross_xdist_as_data_and_the_controller_renders_them(run_plugin) -> None:
    result = run_plugin("-n", "2", "--scenario", "response_lost", "--scenario", "rate_limited",
                        "--agent", WRONG + "idle")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*retry-harness verdicts*",
                                 "*scenario * with agent *idle*: FAIL (verdict above) evidence: *",
                                 "*scenario * with agent *idle*: FAIL (verdict above) evidence: *"])


def test_a_scenario_result_renders_the_same_after_a_round_trip_through_json(tmp_path) -> None:
    from harness.engine import run_scenario
    from harness.report import render_result
    from harness.results import ScenarioResult
    from harness.scenario import load

    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=WRONG + "new_key_per_attempt",
                          evidence_root=tmp_path)
    again = ScenarioResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert render_result(again) == render_result(result)
    assert json.loads((result.evidence_dir / "verdict.json").read_text()) == json.loads(json.dumps(result.to_dict()))
    assert "H002" in render_result(again)


def test_a_run_failed_by_its_expectations_alone_says_failed_everywhere(run_plugin, tmp_path) -> None:
    # the checker finds nothing (the reference agent is right), but the scenario expects two tickets
    scenario = tmp_path / "expect_two_tickets.yaml"
    source = (catalogue_dir() / "response_lost.yaml").read_text()
    assert "effects: {tickets: 1}" in source
    scenario.write_text(source.replace("name: response_lost", "name: expect_two_tickets")
                        .replace("effects: {tickets: 1}", "effects: {tickets: 2}"))
    result = run_plugin("-n", "2", "--scenario", str(scenario))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*X001 scenario-expectation*tickets holds 1 distinct effect(s)*expected 2*",
                                 "*scenario expect_two_tickets * FAIL (verdict above)*"])
    [verdict] = verdict_files(result.evidence_dir)
    assert verdict["passed"] is False and verdict["verdict_passed"] is False and verdict["rules_passed"] is True
    assert [f["code"] for f in verdict["findings"]] == ["X001"]
    assert verdict["expectation_failures"]


def test_black_box_judges_an_agent_that_writes_no_log_from_the_wire(run_plugin, monkeypatch) -> None:
    """`pytest --scenario X --black-box`: a plain agent without a log, judged from the journal and the ledger."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # the agents live in this repository's tests
    monkeypatch.setenv("COLUMNS", "250")  # the short summary's line in full
    blind = run_plugin("--scenario", "response_lost", "--black-box", "--agent",
                       "python -m tests.common.plain_agents.blind_retry", "-rf")
    blind.assert_outcomes(failed=1)
    blind.stdout.fnmatch_lines(["*not judged in black-box mode*",
                                "FAILED *::response_lost - H040 H041 on intent printer-on-fire; X001*"])
    [verdict] = verdict_files(blind.evidence_dir)
    assert verdict["mode"] == "black_box" and verdict["facts"]["key_behaviour"] == "no key"
    keyed = run_plugin("--scenario", "response_lost", "--harness-black-box", "--agent",
                       "python -m tests.common.plain_agents.one_key", "-v")
    keyed.assert_outcomes(passed=1)
    keyed.stdout.fnmatch_lines(["*scenario response_lost with agent*(black-box): PASS*"])


def test_a_flag_of_ours_takes_no_value_when_the_rootdir_is_chosen_again() -> None:
    from harness.pytest_plugin import without_our_options

    assert without_our_options(["--black-box", "tests/x.py", "--agent", "a", "--harness-black-box", "-v"]) == [
        "tests/x.py", "-v"]
