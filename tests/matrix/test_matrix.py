"""The certification matrix: the reference agent passes every scenario (no false alarm) and every
wrong agent is caught where its flaw is targeted, on the expected rule codes (full catch rate).

Cells run in-process through the engine (real destinations, proxy and agent processes); under
`pytest -n 2` they spread over workers, each with its own proxy, ports, ledgers and evidence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import coverage
from harness.matrix import coverage_scenarios, load_expectations, measure_coverage, run_cell
from harness.report import render_matrix
from harness.resources import catalogue_dir, package_path
from harness.results.matrix import REFERENCE, Matrix

EXPECTED = load_expectations()
SCENARIOS = {p.stem: p for p in sorted(catalogue_dir().glob("*.yaml"))}
TARGETED = [(agent, scenario) for agent, targets in EXPECTED.caught_by.items() for scenario in targets]


def test_expected_outcomes_name_real_agents_scenarios_and_rules() -> None:
    from harness.checker import RULES

    codes = set(RULES)
    wrong_dir = package_path("agents", "wrong")  # shipped in the package, as the catalogue is
    for agent, targets in EXPECTED.caught_by.items():
        assert (wrong_dir / f"{agent}.py").is_file(), agent
        assert targets, f"{agent} must name at least one scenario that catches it"
        for scenario, wanted in targets.items():
            assert scenario in SCENARIOS, f"{agent}: unknown scenario {scenario}"
            assert set(wanted) <= codes, f"{agent} on {scenario}: unknown codes {set(wanted) - codes}"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_reference_agent_passes(scenario: str, tmp_path: Path) -> None:
    cell = run_cell(REFERENCE, str(SCENARIOS[scenario]), str(tmp_path), EXPECTED)
    assert cell.verdict == "ok", f"false alarm on {scenario}: {cell.codes} {cell.error or ''} ({cell.evidence})"
    # what the run exercised is what the catalogue's coverage file says of this scenario (the reports' "see ...")
    stored = coverage.load().get(scenario) or {}
    assert cell.exercised["checks"] == stored.get("checks"), (
        f"{scenario} exercises other checks than harness/catalogue_coverage.json says: run `python -m harness "
        f"coverage --write`")
    # whether a lookup during a restart gets an answer is the machine's timing: that row may come and go
    rows = set(cell.exercised["transitions"]) ^ set(stored.get("transitions", []))
    assert rows <= coverage.TIMING_DEPENDENT, (
        f"{scenario} takes other rows of the operation model than harness/catalogue_coverage.json says ({rows}): "
        f"run `python -m harness coverage --write`")


def test_the_coverage_file_covers_the_catalogue_and_no_other_scenario() -> None:
    assert sorted(coverage.load()) == sorted(SCENARIOS)


def test_measuring_coverage_tells_its_progress_after_each_scenario(tmp_path: Path) -> None:
    """What `python -m harness coverage`'s progress line counts: one item a scenario, as each ends."""
    heard: list[tuple[int, int]] = []
    measured = measure_coverage(tmp_path, ["request_lost", "response_lost"],
                                progress=lambda done, failures: heard.append((done, failures)))
    assert sorted(measured) == ["request_lost", "response_lost"]
    assert heard == [(1, 0), (2, 0)]
    assert [p.stem for p in coverage_scenarios()] == sorted(SCENARIOS)  # what the command announces and counts


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_reference_agent_passes_judged_black_box_too(scenario: str, tmp_path: Path) -> None:
    """Its log unread, the wire and the ledger alone: the black-box rules raise no false alarm either."""
    cell = run_cell(REFERENCE, str(SCENARIOS[scenario]), str(tmp_path), EXPECTED, black_box=True)
    assert (cell.verdict, cell.mode) == ("ok", "black_box"), \
        f"black-box false alarm on {scenario}: {cell.codes} {cell.error or ''} ({cell.evidence})"


@pytest.mark.parametrize("agent, scenario", TARGETED, ids=[f"{a}-{s}" for a, s in TARGETED])
def test_wrong_agent_is_caught_where_targeted(agent: str, scenario: str, tmp_path: Path) -> None:
    cell = run_cell(agent, str(SCENARIOS[scenario]), str(tmp_path), EXPECTED)
    assert cell.verdict == "caught", (
        f"{agent} ({EXPECTED.flaws[agent]}) slipped through {scenario}: found {cell.codes}, "
        f"expected {cell.expected_codes} ({cell.evidence})")


def test_matrix_table_and_rates_from_cells() -> None:
    from harness.results.matrix import Cell

    matrix = Matrix([
        Cell(REFERENCE, "s1", True, [], "e"), Cell(REFERENCE, "s2", False, ["H015"], "e"),
        Cell("idle", "s1", False, ["H021"], "e", ["H021"]), Cell("idle", "s2", True, [], "e"),
        Cell("forger", "s1", False, ["H018"], "e", ["H015", "H018"]),
    ])
    assert matrix.catch_rate() == (1, 2)
    assert matrix.false_alarms() == (1, 2)
    text = render_matrix(matrix)
    assert "catch rate: 1/2 wrong agents caught (50%)" in text
    assert "false alarms: 1/2 reference runs failed (50%)" in text
    assert "missed: forger on s1: found H018; expected H015, H018" in text
    assert "false-alarm: reference on s2" in text


def test_matrix_command_prints_the_table(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "harness", "matrix", "--agent", "reference", "--agent", "idle",
         "--scenario", "response_lost", "--jobs", "1", "--evidence-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "catch rate: 1/1 wrong agents caught (100%)" in out.stdout
    assert "false alarms: 0/1 reference runs failed (0%)" in out.stdout
