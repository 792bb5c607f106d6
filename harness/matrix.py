"""The certification matrix: every agent against every scenario, judged against expected outcomes.

The expected outcomes live in one data file (`harness/expected_outcomes.yaml`): the reference
agent must pass every scenario (a failure is a false alarm); each wrong agent must fail the scenarios
that target its flaw, with the named rule codes among the findings (a miss lowers the catch rate).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ScenarioError
from harness.resources import expected_outcomes_file

EXPECTED_FILE = expected_outcomes_file()  # package data (harness.resources)
WRONG_AGENT_MODULE = "harness.agents.wrong."
REFERENCE = "reference"


@dataclass(frozen=True)
class Expectations:
    reference: str
    flaws: dict[str, str]
    caught_by: dict[str, dict[str, list[str]]]  # agent -> scenario -> codes

    def command(self, agent: str) -> str:
        return self.reference if agent == REFERENCE else f"python -m {WRONG_AGENT_MODULE}{agent}"

    @property
    def agents(self) -> list[str]:
        return [REFERENCE, *self.flaws]


def load_expectations(path: Path = EXPECTED_FILE) -> Expectations:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    wrong = data.get("wrong_agents") or {}
    return Expectations(
        reference=data["reference"],
        flaws={name: spec["flaw"] for name, spec in wrong.items()},
        caught_by={name: {s: list(codes) for s, codes in spec["caught_by"].items()}
                   for name, spec in wrong.items()})


@dataclass
class Cell:
    agent: str
    scenario: str
    passed: bool
    codes: list[str]
    evidence: str
    expected_codes: list[str] | None = None  # set where the matrix asserts a catch
    error: str | None = None

    @property
    def verdict(self) -> str:
        """`ok` (as expected), `caught`, `missed` (a wrong agent slipped through), `false-alarm`."""
        if self.agent == REFERENCE:
            return "ok" if self.passed else "false-alarm"
        if self.expected_codes is None:
            return "ok" if self.passed else "fail"
        if not self.passed and set(self.expected_codes) <= set(self.codes):
            return "caught"
        return "missed"


@dataclass
class Matrix:
    cells: list[Cell] = field(default_factory=list)

    def catch_rate(self) -> tuple[int, int]:
        """Wrong agents caught on every scenario that targets them / wrong agents."""
        targeted: dict[str, bool] = {}
        for cell in self.cells:
            if cell.agent != REFERENCE and cell.expected_codes is not None:
                targeted[cell.agent] = targeted.get(cell.agent, True) and cell.verdict == "caught"
        return sum(targeted.values()), len(targeted)

    def false_alarms(self) -> tuple[int, int]:
        ref = [c for c in self.cells if c.agent == REFERENCE]
        return sum(not c.passed for c in ref), len(ref)


def run_cell(agent: str, scenario_path: str, evidence_root: str, expected: Expectations | None = None) -> Cell:
    """Run one agent on one scenario (in this process, reusing its proxy)."""
    from harness.engine import EXPECTATION_CODE, run_scenario
    from harness.scenario import load

    expected = expected or load_expectations()
    scenario = load(scenario_path)
    codes_wanted = expected.caught_by.get(agent, {}).get(scenario.name)
    try:
        result = run_scenario(scenario, agent=expected.command(agent), evidence_root=Path(evidence_root),
                              keep_evidence="failed")
    except Exception as exc:  # noqa: BLE001 - a broken cell is reported, the matrix goes on
        return Cell(agent, scenario.name, False, [], "", codes_wanted, error=f"{type(exc).__name__}: {exc}")
    codes = sorted({f.code for f in result.verdict.findings}  # X001 findings are the verdict's
                   | ({EXPECTATION_CODE} if result.expectation_failures else set()))
    return Cell(agent, scenario.name, result.passed, codes, str(result.evidence_dir), codes_wanted)


def run_matrix(agents: list[str], scenario_paths: list[Path], evidence_root: Path, *,
               jobs: int = 1) -> Matrix:
    expected = load_expectations()
    unknown = [a for a in agents if a not in expected.agents]
    if unknown:
        raise ScenarioError(f"unknown agent(s) {', '.join(unknown)} for the matrix; valid: "
                            f"{', '.join(expected.agents)} (see {EXPECTED_FILE})")
    # scenario-major: consecutive runs share destinations, so the warm pool reuses their process
    work = [(a, str(p), str(evidence_root)) for p in scenario_paths for a in agents]
    if jobs <= 1:
        return Matrix([run_cell(*w, expected) for w in work])
    # one process per job: each has its own embedded proxy (mitmproxy allows one per process)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        return Matrix(list(pool.map(run_cell, *zip(*work, strict=True))))


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def as_dict(matrix: Matrix) -> dict[str, Any]:
    caught, wrong = matrix.catch_rate()
    alarms, ref = matrix.false_alarms()
    return {"catch_rate": [caught, wrong], "false_alarms": [alarms, ref],
            "cells": [{**c.__dict__, "verdict": c.verdict} for c in matrix.cells]}
