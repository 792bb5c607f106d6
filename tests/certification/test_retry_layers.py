"""Which retry layer made each retry, in a framework cell (issue 45: "the crewAI rows say which retry layer made
each attempt"): read from the agent's log (``retry_layers``), said in the cell, and held to expected.yaml's
``retried_by`` like the rest of the cell. The crewAI rows' own cells run in test_framework_matrix.py."""

from __future__ import annotations

from pathlib import Path

from certification.matrix import (
    CellOutcome,
    framework_difference,
    load_frameworks,
    retry_layers,
)
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.results.matrix import Cell
from harness.scenario import load

TOOL_USAGE = "run again by crewAI's ToolUsage"
COLUMNS, AGENTS = load_frameworks()


def test_a_cell_says_which_layer_made_each_retry() -> None:
    cell = CellOutcome("fail", ("H010",), effects=2, attempts=3, key="no key",
                       retried_by=(TOOL_USAGE, "run again by crewAI's task rerun"))
    assert cell.said() == ("FAIL H010: 2 effects, 3 attempts (the 2nd run again by crewAI's ToolUsage, the 3rd run "
                           "again by crewAI's task rerun), no key")
    assert CellOutcome("pass", attempts=2, retried_by=("", "")).said() == "PASS: 1 effect, 2 attempts, -"


def test_the_crewai_rows_expect_their_layers() -> None:
    """Every crewAI cell with a retry names its layer: ToolUsage's rerun of a tool that raised, or the task run
    again after the model's error."""
    for name, agent in AGENTS.items():
        if agent.framework != "crewai":
            continue
        for column, cell in agent.cells.items():
            want = "run again by crewAI's task rerun" if "model_error" in column else TOOL_USAGE
            assert cell.retried_by == (want,) * (cell.attempts - 1), (name, column, cell)


def test_a_retry_made_by_another_layer_than_expected_differs() -> None:
    """The wrong word: the cell is the expected one in every count, but the log says the task was run again where
    expected.yaml says crewAI's ToolUsage ran the tool again: a difference, which names both."""
    agent, column = AGENTS["crewai_raise_on_error"], COLUMNS["response_lost"]
    want = agent.cells[column.name]
    facts = {"effects": want.effects, "attempts": want.attempts, "key_behaviour": want.key}

    def cell(layers: list[str]) -> Cell:
        return Cell(agent.name, column.scenario, False, list(want.codes), "", bundled=False,
                    facts=facts | {"retry_layers": layers})

    assert framework_difference(agent, column, cell([TOOL_USAGE])) is None
    said = framework_difference(agent, column, cell(["run again by crewAI's task rerun"]))
    assert said is not None and "the 2nd run again by crewAI's task rerun" in said and TOOL_USAGE in said, said
    assert framework_difference(agent, column, cell([])) is not None  # a log that names no layer


def test_the_layer_is_read_from_a_real_runs_log(tmp_path: Path) -> None:
    """tenacity's hook notes its decision on the next attempt (harness.instrument): the layer is "tenacity"; the
    reference agent's retry names none (the records' words alone)."""
    scenario = load(catalogue_dir() / "response_lost.yaml")
    noted = run_scenario(scenario, agent="python -m harness.agents.instrumented.tenacity_retry",
                         evidence_root=tmp_path / "tenacity", keep_evidence="all")
    assert noted.passed and noted.facts["attempts"] == 2
    assert retry_layers(Path(noted.evidence_dir)) == ["tenacity"]
    plain = run_scenario(load(catalogue_dir() / "rate_limited.yaml"), evidence_root=tmp_path / "reference",
                         keep_evidence="all")  # a 429: the reference agent waits it out and sends again
    assert plain.passed and plain.facts["attempts"] == 2
    assert retry_layers(Path(plain.evidence_dir)) == []
