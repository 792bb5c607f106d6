"""The catalogue as patterns: each scenario placed on a project's destinations, or not applicable with why."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.catalogue import NotApplicable, markers, place
from harness.project import Project
from harness.resources import catalogue
from harness.scenario import Intent, Scenario, load
from tests.project.test_project import GOOD, project_folder

CATALOGUE = {p.stem: p for p in catalogue()}


def project_of(scenario: Scenario, **changes: object) -> Project:
    """A project made of a scenario's own destinations and intents (no agent: the reference agent)."""
    return Project(path=Path("pyproject.toml"), folder=Path("."), agent_words=None, mode="events",
                   destinations=dict(scenario.destinations), intents=tuple(scenario.intents), operations={},
                   scenario_dirs=(), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_a_scenario_placed_on_its_own_destination_is_itself(name: str) -> None:
    """The pattern's needs are met by the destination it was written for, and placing it there changes nothing
    that is judged: the same faults, intents, expectations, crashes."""
    scenario = load(CATALOGUE[name])
    placed = place(scenario, project_of(scenario, delegation=True))
    assert isinstance(placed, Scenario), placed
    def judged(s: Scenario) -> dict[str, object]:
        return s.model_dump(mode="json", include={"faults", "intents", "expect", "restart_agent",
                                                  "restart_destinations", "agent_log"})
    assert judged(placed) == judged(scenario)
    assert placed.destinations.keys() == scenario.destinations.keys()


@pytest.fixture
def helpy(tmp_path: Path) -> Project:
    from harness.project import load_project

    return load_project(project_folder(tmp_path, GOOD.replace('agent = "python agent.py --summary '
                                                             '{params.summary}"\n', "")) / "pyproject.toml")


def test_a_keyed_api_with_a_lookup_takes_the_scenarios_made_for_one(helpy: Project) -> None:
    placed = {name: place(load(path), helpy) for name, path in CATALOGUE.items()}
    applies = sorted(n for n, s in placed.items() if isinstance(s, Scenario))
    assert applies == ["crash_after_dispatch", "destination_restart", "lookup_lag", "lookup_unavailable",
                       "rate_limited", "request_lost", "response_lost", "server_error_after_commit",
                       "server_error_before_commit", "timeout_late_success"]
    skipped = {n: s.reason for n, s in placed.items() if isinstance(s, NotApplicable)}
    assert "helpy declares a lookup" in skipped["response_lost_key_replay"]
    assert "deduplicates writes" in skipped["response_lost_no_dedup_no_lookup"]
    assert "reached over http" in skipped["ssh_restart_dropped"]
    assert "add another [[tool.retry-harness.intents]]" in skipped["two_intents_one_run"]


def test_the_faults_land_on_the_projects_write_and_lookup(helpy: Project) -> None:
    placed = place(load(CATALOGUE["lookup_unavailable"]), helpy)
    assert isinstance(placed, Scenario)
    assert [(r.match.destination, r.match.method, r.match.path) for r in placed.faults] == [
        ("helpy", "POST", "/api/v2/tickets"), ("helpy", "GET", "/api/v2/tickets")]
    assert placed.expect.states == {"printer-fire": "succeeded"} and placed.expect.effects == {"helpy": 1}
    assert placed.intents[0].params["external_id"] == "inc-1"
    assert set(markers(placed)) == {"http", "lost_response", "read_fault"}


def test_the_scenarios_own_settings_are_carried_onto_the_projects_destination(helpy: Project) -> None:
    placed = place(load(CATALOGUE["lookup_lag"]), helpy)
    assert isinstance(placed, Scenario) and placed.destinations["helpy"].lookup_lag_seconds == 0.8
    assert placed.destinations["helpy"].retention_seconds == 3600  # the project's own, untouched


def test_a_correction_needs_a_second_intent_with_another_payload(helpy: Project) -> None:
    first = helpy.intents[0]
    same = Intent(intent_id="printer-fire-2", kind=first.kind, destination=first.destination, params=first.params)
    twice = Project(**{**helpy.__dict__, "intents": (first, same), "memo": {}})
    outcome = place(load(CATALOGUE["payload_changed"]), twice)
    assert isinstance(outcome, NotApplicable) and "same params" in outcome.reason
    corrected = same.model_copy(update={"params": {**first.params, "summary": "Printer on fire, floor 2"}})
    placed = place(load(CATALOGUE["payload_changed"]), Project(**{**helpy.__dict__, "intents": (first, corrected),
                                                                   "memo": {}}))
    assert isinstance(placed, Scenario)
    assert placed.intents[1].supersedes == "printer-fire"
    assert placed.expect.effects == {"helpy": 2}


def test_delegation_is_only_placed_on_an_agent_that_says_it_delegates() -> None:
    scenario = load(CATALOGUE["delegated_worker"])
    outcome = place(scenario, project_of(scenario))
    assert isinstance(outcome, NotApplicable) and "delegation = true" in outcome.reason
