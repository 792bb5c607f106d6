"""The certification matrix as data: one cell per agent and scenario, the rates, and its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.contract import EVENTS_MODE

REFERENCE = "reference"


@dataclass
class Cell:
    agent: str  # the row's label: a bundled agent's name, or a team's own label (LABEL=COMMAND, else the command)
    scenario: str
    passed: bool
    codes: list[str]
    evidence: str
    expected_codes: list[str] | None = None  # set where the matrix asserts a catch
    error: str | None = None
    command: str = ""
    bundled: bool = True  # False: a team's own agent, no expected outcome
    mode: str = EVENTS_MODE  # how the run was judged: with its audit log, or black-box
    # what the wire and the ledger show (``ScenarioResult.facts``): effects, attempts, key_behaviour, intents
    facts: dict[str, Any] = field(default_factory=dict)
    # what the run exercised (harness.coverage.entry): the checks that held having been reached, the model's rows
    exercised: dict[str, list[str]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """`ok` (as expected), `caught`, `missed` (a wrong agent slipped through), `false-alarm`; a team's own
        agent (no expected outcome): `ok` or `fail`."""
        if self.agent == REFERENCE and self.bundled:
            return "ok" if self.passed else "false-alarm"
        if self.expected_codes is None:
            return "ok" if self.passed else "fail"
        if not self.passed and set(self.expected_codes) <= set(self.codes):
            return "caught"
        return "missed"

    @property
    def outcome(self) -> str:
        """The cell in a certification table: PASS, or FAIL with the rule codes found (ERROR if it never ran);
        where the matrix asserts something of a bundled agent, what it asserted follows."""
        if self.error:
            return "ERROR"
        said = "PASS" if self.passed else " ".join(["FAIL", *self.codes])
        if self.bundled and self.verdict in ("caught", "missed", "false-alarm"):
            said += f" ({self.verdict})"
        return said

    def fact(self, name: str) -> str:
        """One black-box fact as the table shows it ("-" when the run gave none)."""
        value = self.facts.get(name)
        return "-" if value is None else str(value)


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
        ref = [c for c in self.cells if c.agent == REFERENCE and c.bundled]
        return sum(not c.passed for c in ref), len(ref)

    def uncertified(self) -> list[Cell]:
        """The cells of a team's own agents that failed, and any cell that never ran."""
        return [c for c in self.cells if c.error or (not c.bundled and not c.passed)]

    @property
    def ok(self) -> bool:
        """Every wrong agent caught where targeted, no false alarm, every team agent passed, every cell ran."""
        caught, wrong = self.catch_rate()
        return caught == wrong and self.false_alarms()[0] == 0 and not self.uncertified()



def as_dict(matrix: Matrix) -> dict[str, Any]:
    """The matrix as JSON (`--format json`, `--json FILE`): the rates, the agents (label, command, bundled),
    and every cell with its verdict, its outcome (PASS/FAIL and codes) and its black-box facts."""
    caught, wrong = matrix.catch_rate()
    alarms, ref = matrix.false_alarms()
    agents = {c.agent: {"label": c.agent, "command": c.command, "bundled": c.bundled} for c in matrix.cells}
    return {"catch_rate": [caught, wrong], "false_alarms": [alarms, ref], "passed": matrix.ok,
            "agents": list(agents.values()),
            "cells": [{**c.__dict__, "verdict": c.verdict, "outcome": c.outcome} for c in matrix.cells]}
