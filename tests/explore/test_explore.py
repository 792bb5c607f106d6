"""The search itself, with a scripted runner in place of the engine (each test says what fails): it finds,
shrinks without slipping to other rule codes, reports flakes unshrunk, replays, stays in its bounds.
The runs through the real engine are in test_explore_end_to_end.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.explore import explore
from harness.resources import catalogue_dir
from harness.results import AgentRun, ScenarioResult
from harness.results.verdict import Finding, Verdict
from harness.scenario import Scenario, load

BASE = load(catalogue_dir() / "response_lost.yaml")


def runner(codes_for: Callable[[Scenario], tuple[str, ...]], root: Path,
           seen: list[Scenario] | None = None) -> Callable[[Scenario], ScenarioResult]:
    """A run judged by `codes_for` (no code: passed), with an evidence folder like the engine's."""
    count = [0]

    def run(scenario: Scenario) -> ScenarioResult:
        count[0] += 1
        if seen is not None:
            seen.append(scenario)
        folder = root / f"run-{count[0]}"
        folder.mkdir(parents=True)
        verdict = Verdict()
        verdict.add_findings([Finding(code, "scripted", None, "scripted", []) for code in codes_for(scenario)])
        return ScenarioResult(scenario.name, "agent", verdict.passed, verdict, folder,
                              [AgentRun("agent", 0, False, False, 0.01)])

    return run


def actions(scenario: Scenario) -> list[str]:
    return [rule.action for rule in scenario.faults]


def test_a_failure_is_found_shrunk_to_its_cause_confirmed_and_written(tmp_path: Path) -> None:
    def codes(scenario: Scenario) -> tuple[str, ...]:
        return ("H016",) if "synthetic_status" in actions(scenario) else ()

    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=200, seed=1, database=None,
                    reproducer=tmp_path / "found.yaml", runner=runner(codes, tmp_path / "runs"))
    assert [f.codes for f in state.found] == [("H016",)]
    found = state.found[0]
    assert found.schedule.size == 1 and actions(found.schedule.apply(BASE)) == ["synthetic_status"]
    assert found.confirmed and found.reproducer == (tmp_path / "found.yaml").resolve()
    again = load(tmp_path / "found.yaml")
    assert again.name == "found" and actions(again) == ["synthetic_status"]
    assert "H016" in again.description and "--seed 1" in again.description
    assert state.failed and not state.flaky


def test_the_shrink_keeps_the_rule_codes_it_started_from(tmp_path: Path) -> None:
    """Two faults trip H005, one alone H017: a shrink to one fault would slip to another failure."""
    def codes(scenario: Scenario) -> tuple[str, ...]:
        n = len(scenario.faults)
        return ("H005",) if n >= 2 else ("H017",) if n == 1 else ()

    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=100, seed=3, database=None,
                    runner=runner(codes, tmp_path / "runs"))
    found = state.found[0]
    assert found.codes == state.failing[0]
    assert len(found.schedule.faults) == (2 if found.codes == ("H005",) else 1)
    assert all(r.codes != found.codes for r in state.also_failed)


def test_a_flaky_failure_is_reported_and_not_shrunk(tmp_path: Path) -> None:
    ran: dict[str, int] = {}

    def codes(scenario: Scenario) -> tuple[str, ...]:
        key = str([r.model_dump() for r in scenario.faults])
        ran[key] = ran.get(key, 0) + 1
        return ("H021",) if scenario.faults and ran[key] == 1 else ()  # fails the first time only

    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=30, seed=4, database=None,
                    runner=runner(codes, tmp_path / "runs"))
    assert state.flaky and not state.found
    assert all(f.first_codes == ("H021",) and f.rerun_codes == () for f in state.flaky)
    assert state.failed  # a flaky failure is still a failure to look at


def test_no_failure_is_exit_zero_material_and_counts_what_it_ran(tmp_path: Path) -> None:
    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=20, seed=5, database=None,
                    runner=runner(lambda s: (), tmp_path / "runs"))
    assert not state.failed and state.runs == len({s for s in range(state.runs)})
    assert 0 < state.runs <= 20 and state.drawn >= state.runs


def test_the_same_seed_draws_the_same_schedules(tmp_path: Path) -> None:
    def drawn(seed: int, where: str) -> list[str]:
        seen: list[Scenario] = []
        explore(BASE, agent="agent", evidence_root=tmp_path / where, examples=15, seed=seed, database=None,
                runner=runner(lambda s: (), tmp_path / where / "runs", seen))
        return [str(s.model_dump(exclude={"source", "description"})) for s in seen]

    assert drawn(7, "a") == drawn(7, "b")
    assert drawn(7, "c") != drawn(8, "d")


def test_the_example_database_replays_the_last_failure_first(tmp_path: Path) -> None:
    def codes(scenario: Scenario) -> tuple[str, ...]:
        return ("H010",) if "synthetic_status" in actions(scenario) else ()

    database = tmp_path / "db"  # unseeded: a seed reproduces its own draws and leaves the database out (Hypothesis')
    first = explore(BASE, agent="agent", evidence_root=tmp_path / "one", examples=300, database=database,
                    runner=runner(codes, tmp_path / "one" / "runs"))
    assert first.found
    seen: list[Scenario] = []
    second = explore(BASE, agent="agent", evidence_root=tmp_path / "two", examples=300, database=database,
                     runner=runner(codes, tmp_path / "two" / "runs", seen))
    assert second.found and second.found[0].first_seen_at == 1  # the very first schedule run failed
    assert sorted(actions(seen[0])) == sorted(actions(first.found[0].schedule.apply(BASE)))


def test_max_seconds_stops_the_search(tmp_path: Path) -> None:
    def slow(scenario: Scenario) -> tuple[str, ...]:
        time.sleep(0.05)
        return ()

    began = time.monotonic()
    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=10_000, seed=6, database=None,
                    max_seconds=0.5, runner=runner(slow, tmp_path / "runs"))
    assert state.stopped_by == "max_seconds" and state.runs < 10_000
    assert time.monotonic() - began < 60  # the skipped draws cost no run


def test_the_shrink_budget_bounds_the_runs_spent_shrinking(tmp_path: Path) -> None:
    def codes(scenario: Scenario) -> tuple[str, ...]:
        return ("H016",) if len(scenario.faults) >= 2 else ()

    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=50, seed=2, database=None,
                    max_shrink_runs=3, runner=runner(codes, tmp_path / "runs"))
    assert state.found
    first = state.found[0].first_seen_at
    assert state.runs <= first + 3 + 2  # the confirmation rerun, the reproducer's run


def test_only_the_evidence_that_explains_the_outcome_is_kept(tmp_path: Path) -> None:
    def codes(scenario: Scenario) -> tuple[str, ...]:
        return ("H016",) if scenario.faults else ()

    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=60, seed=9, database=None,
                    runner=runner(codes, state_root := tmp_path / "scripted"))
    assert state.found
    kept = {p.name for p in (state.folder / "runs").glob("*")} if (state.folder / "runs").exists() else set()
    assert kept == set()  # the scripted runner writes elsewhere; the engine's run folders are under runs/
    assert state_root.exists()


@pytest.mark.parametrize("examples", [1, 3])
def test_a_tiny_budget_still_ends_cleanly(tmp_path: Path, examples: int) -> None:
    state = explore(BASE, agent="agent", evidence_root=tmp_path, examples=examples, seed=0, database=None,
                    runner=runner(lambda s: (), tmp_path / "runs"))
    assert not state.failed and state.runs <= examples


def test_a_reproducer_path_that_cannot_be_written_is_a_clear_error_and_the_draft_stays(tmp_path: Path) -> None:
    from harness.errors import HarnessError

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")

    def codes(scenario: Scenario) -> tuple[str, ...]:
        return ("H016",) if scenario.faults else ()

    with pytest.raises(HarnessError, match="cannot write the reproducer") as caught:
        explore(BASE, agent="agent", evidence_root=tmp_path, examples=30, seed=1, database=None,
                reproducer=blocker / "found.yaml", runner=runner(codes, tmp_path / "runs"))
    draft = Path(str(caught.value).split("it is at ")[1].split(" (")[0])
    assert draft.is_file() and "H016" in draft.read_text()
