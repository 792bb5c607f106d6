"""Black-box certification end to end: un-instrumented agents (plain requests, no audit log) through the
real engine, fault proxy and built-in destinations, judged from the journal and the ledger alone.

The agents are tests/common/plain_agents (one habit each); the scenarios (`agent_log: none`) are beside
this file. tickets and payments deduplicate on Idempotency-Key (Stripe-like); email does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.results import ScenarioResult
from harness.scenario import load

SCENARIOS = Path(__file__).parent / "scenarios"
PLAIN = "python -m tests.common.plain_agents."


def run(scenario: str, agent: str, tmp_path: Path, **options: object) -> ScenarioResult:
    path = SCENARIOS / f"{scenario}.yaml" if (SCENARIOS / f"{scenario}.yaml").exists() else \
        catalogue_dir() / f"{scenario}.yaml"
    return run_scenario(load(path), agent=PLAIN + agent, evidence_root=tmp_path, **options)  # type: ignore[arg-type]


def codes(result: ScenarioResult) -> set[str]:
    return result.verdict.codes


@pytest.mark.parametrize("scenario, destination", [("black_box_response_lost", "tickets"),
                                                    ("black_box_email_lost", "email")])
def test_a_blind_retry_without_a_key_fails_on_the_duplicate_effect(tmp_path: Path, scenario: str,
                                                                    destination: str) -> None:
    result = run(scenario, "blind_retry", tmp_path)
    text = render_result(result)
    assert not result.passed and result.verdict.black_box, text
    assert {"H040", "H041"} <= codes(result), text
    [intent] = result.verdict.intents
    assert len(intent.effects) == 2 and intent.key_behaviour == "no key" and intent.classification == "duplicate"
    [h041] = result.verdict.by_code("H041")
    said = "without a key although tickets deduplicates" if destination == "tickets" else \
        "on email, which does not deduplicate: a blind retry"
    assert said in h041.message
    assert result.facts == {"effects": 2, "attempts": 2, "key_behaviour": "no key",
                            "intents": [intent_facts(result, 0)]}
    assert "not judged in black-box mode" in text
    verdict_file = json.loads((result.evidence_dir / "verdict.json").read_text())
    assert verdict_file["mode"] == "black_box" and verdict_file["facts"]["effects"] == 2
    assert not (result.evidence_dir / "agent.ndjson").exists()  # judged without any log


def intent_facts(result: ScenarioResult, index: int) -> dict[str, object]:
    return result.facts["intents"][index]  # type: ignore[no-any-return]


@pytest.mark.parametrize("scenario", ["black_box_response_lost", "black_box_rate_limited", "black_box_payments_down"])
def test_one_key_across_the_retries_passes(tmp_path: Path, scenario: str) -> None:
    result = run(scenario, "one_key", tmp_path)
    assert result.passed, render_result(result)
    [intent] = result.verdict.intents
    assert intent.key_behaviour.startswith("one key on ")
    assert len(intent.effects) == (0 if scenario == "black_box_payments_down" else 1)


def test_a_new_key_per_retry_fails_on_the_key_rule(tmp_path: Path) -> None:
    result = run("black_box_response_lost", "key_per_retry", tmp_path)
    assert {"H040", "H041"} <= codes(result), render_result(result)
    assert "with a changed key (its key plain-printer-on-fire-0, then plain-printer-on-fire-1)" in \
        result.verdict.by_code("H041")[0].message
    assert result.facts["key_behaviour"] == "key changed"


def test_ignoring_retry_after_fails_that_rule(tmp_path: Path) -> None:
    result = run("black_box_rate_limited", "ignores_retry_after", tmp_path)
    assert codes(result) == {"H042"}, render_result(result)
    assert "which asked to wait 1 s (Retry-After '1', as the journal records)" in \
        result.verdict.by_code("H042")[0].message


def test_a_changed_payload_under_one_key_fails_the_drift_rule(tmp_path: Path) -> None:
    result = run("black_box_response_lost", "payload_drift", tmp_path)
    assert codes(result) == {"H044"}, render_result(result)
    [intent] = result.verdict.intents
    assert intent.classification == "key_conflict" and intent.effects == ["tkt_0001"]
    assert [a["destination_saw"][0]["outcome"] for a in intent.attempts] == ["committed", "rejected"]


def test_a_retry_loop_past_the_budget_fails_it(tmp_path: Path) -> None:
    result = run("black_box_payments_down", "unbounded_retry", tmp_path)
    assert codes(result) == {"H043"}, render_result(result)
    assert result.facts["attempts"] == 8
    assert [a["attributed_by"] for a in result.verdict.intents[0].attempts] == ["route"] * 8  # none reached it


def test_black_box_flag_on_a_catalogue_scenario_says_its_states_are_not_judged(tmp_path: Path) -> None:
    """--black-box on a scenario that expects states: the effects are judged, the states said not to be."""
    blind = run("response_lost", "blind_retry", tmp_path, black_box=True)
    assert {"H040", "H041", "X001"} <= codes(blind), render_result(blind)
    assert any("expect.states" in q for q in blind.verdict.not_judged)
    assert all("ended" not in f.message for f in blind.verdict.by_code("X001"))
    ok = run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path, black_box=True)
    assert ok.passed and ok.verdict.black_box, render_result(ok)  # the reference agent, its log unread


def test_check_judges_a_kept_folder_in_the_mode_of_its_run(tmp_path: Path) -> None:
    result = run("black_box_response_lost", "blind_retry", tmp_path)
    again = subprocess.run([sys.executable, "-m", "harness", "check", str(result.evidence_dir), "--format", "json"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1, again.stdout + again.stderr
    data = json.loads(again.stdout)
    assert data["mode"] == "black_box" and {"H040", "H041", "X001"} <= {f["code"] for f in data["findings"]}


def test_check_black_box_judges_an_events_run_without_its_log(tmp_path: Path) -> None:
    """The reference agent's run, judged again from the wire alone: it passes, and says what it cannot judge."""
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path)
    assert result.passed and not result.verdict.black_box
    assert result.facts["key_behaviour"] == "one key on 1 attempt"  # the facts, whatever the mode
    again = subprocess.run([sys.executable, "-m", "harness", "check", str(result.evidence_dir), "--black-box"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "black-box: judged from the proxy journal and the effect ledger alone" in again.stdout
    assert "the final state the scenario expects of each intent" in again.stdout


@pytest.mark.parametrize("agent", ["one_key", "blind_retry"])
def test_two_intents_of_one_kind_on_a_form_api_are_told_apart_by_the_params_it_parsed(tmp_path: Path,
                                                                                     agent: str) -> None:
    """A generic destination reading form bodies (its params are strings): each write goes to its intent by
    its params, so the retry of the lost first payment is the first intent's, and only its duplicate fails."""
    result = run("black_box_form_two_intents", agent + " --form", tmp_path)
    intents = {i.intent_id: i for i in result.verdict.intents}
    assert [len(intents["pi-small"].attempts), len(intents["pi-large"].attempts)] == [2, 1], render_result(result)
    assert {a["attributed_by"] for i in intents.values() for a in i.attempts} == {"kind and params"}
    assert intents["pi-large"].passed and len(intents["pi-large"].effects) == 1
    if agent == "one_key":
        assert result.passed, render_result(result)
    else:
        assert {f.code for f in intents["pi-small"].findings} == {"H040", "H041"}
        assert len(intents["pi-small"].effects) == 2
