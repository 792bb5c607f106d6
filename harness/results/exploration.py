"""An exploration as data: each schedule run, the failures found and shrunk, the flaky ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.results.scenario_result import ScenarioResult
    from harness.schedule import Schedule


@dataclass
class ScheduleRun:
    """One schedule run through the engine."""

    schedule: Schedule
    passed: bool
    incomplete: bool
    codes: tuple[str, ...]  # the verdict's rule codes (X001 included)
    evidence_dir: Path | None
    seconds: float  # the whole run, harness included
    agent_seconds: float
    flaky: bool = False  # failed, then did not fail the same way on a rerun

    @property
    def failed(self) -> bool:
        return not self.passed and not self.incomplete and not self.flaky

    @classmethod
    def of(cls, schedule: Schedule, result: ScenarioResult, seconds: float) -> ScheduleRun:
        codes = sorted(result.verdict.codes)
        return cls(schedule, result.passed, bool(result.incomplete), tuple(codes),
                   result.evidence_dir if result.evidence_kept else None, seconds,
                   sum(run.seconds for run in result.agent_runs))


@dataclass
class Found:
    """A failure the search found and shrank, and its reproducer."""

    schedule: Schedule  # shrunk
    codes: tuple[str, ...]
    rule_names: dict[str, str]
    first_seen_at: int  # schedules run when this code set first failed: the examples it took
    first_schedule: Schedule  # as first drawn, before shrinking
    evidence_dir: Path | None
    reproducer: Path | None = None
    confirmed: bool | None = None  # the reproducer, loaded back and run once more, failed the same codes
    confirmation_codes: tuple[str, ...] = ()
    confirmation_evidence: Path | None = None


@dataclass
class Flake:
    schedule: Schedule
    first_codes: tuple[str, ...]
    rerun_codes: tuple[str, ...]  # () when the rerun passed
    evidence_dir: Path | None


@dataclass
class Exploration:
    base: str
    agent: str
    seed: int | None
    examples: int
    folder: Path  # evidence of the failing runs and the confirmations
    runs: int = 0  # schedules actually run (reruns and confirmations included)
    drawn: int = 0  # schedules Hypothesis asked for (cached ones included)
    skipped: int = 0  # drawn after a bound was reached, not run
    found: list[Found] = field(default_factory=list)
    flaky: list[Flake] = field(default_factory=list)
    incomplete: list[ScheduleRun] = field(default_factory=list)
    seconds: float = 0.0
    agent_seconds: float = 0.0
    run_seconds: float = 0.0
    stopped_by: str = "examples"  # examples | failure | max_seconds | exhausted | interrupted
    # each code set seen failing, as the search goes (the first is the target): schedules run when first seen,
    # and the schedule
    first_seen: dict[tuple[str, ...], tuple[int, Schedule]] = field(default_factory=dict)
    also_failed: list[ScheduleRun] = field(default_factory=list)  # other code sets than the target's, not shrunk

    @property
    def failed(self) -> bool:
        return bool(self.found or self.flaky or self.also_failed)

    @property
    def failing(self) -> list[tuple[str, ...]]:
        return list(self.first_seen)

    @property
    def confirmed(self) -> list[Found]:
        return [f for f in self.found if f.confirmed]
