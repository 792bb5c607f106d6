"""Exploration: Hypothesis draws fault schedules over a scenario, the engine runs each, the checker judges.

`python -m harness explore SCENARIO` and `pytest --scenario X --explore N` call :func:`explore`. Each
drawn :class:`~harness.schedule.Schedule` is laid over the base scenario and run through the real
engine (the warm destination pool and the shared proxy: nothing restarts between schedules unless the
schedule crashes something), and the full checker is the property: a run with findings is a failure.

- **A failure keeps its rule codes while shrinking.** The first code set that fails is the target:
  only a run failing with exactly those codes fails the property, so the shrink never slips into
  another failure. Other code sets met on the way are reported (``also_failed``), not shrunk.
- **Flaky is not shrunk.** A code set seen for the first time is run again at once; if the rerun does
  not fail the same way, the schedule is reported flaky and counts as passed for the search.
- **Replayable.** Equal schedules are run once (a cache by :meth:`Schedule.key`); ``seed`` fixes the
  draws; without a seed, the example database replays the last failure first (a seeded search
  reproduces its own draws and, as Hypothesis' ``@seed`` does, leaves the database out).
- **Bounded.** ``examples`` schedules, ``max_seconds`` of wall time, ``max_shrink_runs``: past a bound,
  schedules not run yet are rejected without running, so Hypothesis winds down on what it has.
- **Confirmed.** Each shrunk failure becomes a scenario file, loaded back and run once more: only a
  reproducer that fails the same rule codes is ``confirmed``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.contract import NAME_PATTERN
from harness.errors import HarnessError
from harness.explore_defaults import (
    DEFAULT_CLIENT_TIMEOUT,
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_FAULTS,
    DEFAULT_MAX_SHRINK_RUNS,
)
from harness.results.exploration import Exploration, Flake, Found, ScheduleRun
from harness.safe_files import remove_tree

if TYPE_CHECKING:  # imported when a search runs
    from harness.results.scenario_result import ScenarioResult
    from harness.scenario import ContainerAgent, Scenario
    from harness.schedule import Schedule

MAX_NAME_LENGTH = 100  # harness.scenario.MAX_NAME_LENGTH (a test keeps them equal)


class ScheduleFailed(Exception):
    """The property's failure: the checker judged a schedule's run failed with the target's rule codes."""

    def __init__(self, run: ScheduleRun) -> None:
        super().__init__(f"{', '.join(run.codes)}: {'; '.join(run.schedule.summary())}")
        self.run = run


class _BudgetSpent(BaseException):
    """Raised past ``max_seconds`` before anything failed: not an Exception, so Hypothesis stops at once
    instead of taking it for a failure to shrink."""


Progress = Callable[[Exploration], None]


def explore(base: Scenario, *, agent: str | ContainerAgent, evidence_root: Path, examples: int = DEFAULT_EXAMPLES,
            seed: int | None = None, max_seconds: float | None = None, database: Path | None = None,
            client_timeout: float = DEFAULT_CLIENT_TIMEOUT, max_faults: int = DEFAULT_MAX_FAULTS,
            max_shrink_runs: int = DEFAULT_MAX_SHRINK_RUNS, agent_timeout: float | None = None,
            reproducer: Path | None = None, progress: Progress | None = None,
            runner: Callable[[Scenario], ScenarioResult] | None = None, sandbox: str | None = None) -> Exploration:
    """Search schedules over `base` for one that makes `agent` fail; shrink, confirm and write what it found.

    `database`: the Hypothesis example database folder (None: none). `reproducer`: where the shrunk
    failure's scenario is written (default: found.yaml in the exploration's folder). `runner` runs one
    scenario (default: the engine, keeping the evidence of failed runs only; ``sandbox`` as ``run_scenario``'s)."""
    from hypothesis import HealthCheck, Phase, given, reject, settings
    from hypothesis import seed as seed_decorator
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.errors import Flaky, Unsatisfiable

    from harness.engine import new_evidence_dir, run_scenario
    from harness.scenario import agent_label
    from harness.strategies import schedules

    def scenario_of(schedule: Schedule, **names: str) -> Scenario:
        scenario = schedule.apply(base, **names)  # its agent timeout grows with the intents, unless given
        if agent_timeout is not None:
            scenario = scenario.model_copy(update={"agent_timeout_seconds": agent_timeout})
        return scenario

    folder = new_evidence_dir(Path(evidence_root).resolve(), f"explore-{base.name}"[:MAX_NAME_LENGTH])
    runs_root = folder / "runs"
    state = Exploration(base.name, agent_label(agent), seed, examples, folder)
    run_one = runner or (lambda scenario: run_scenario(scenario, agent=agent, evidence_root=runs_root,
                                                       keep_evidence="failed", sandbox=sandbox))
    cache: dict[str, ScheduleRun] = {}
    confirmed_codes: set[tuple[str, ...]] = set()
    first_seen = state.first_seen
    began = time.monotonic()
    shrink_runs_left = [max_shrink_runs]

    def execute(schedule: Schedule) -> ScheduleRun:
        t0 = time.perf_counter()
        result = run_one(scenario_of(schedule))
        run = ScheduleRun.of(schedule, result, time.perf_counter() - t0)
        state.runs += 1
        state.run_seconds += run.seconds
        state.agent_seconds += run.agent_seconds
        if run.incomplete:
            state.incomplete.append(run)
        if progress is not None:
            progress(state)
        return run

    def over_budget() -> str | None:
        if max_seconds is not None and time.monotonic() - began > max_seconds:
            return "max_seconds"
        if first_seen and shrink_runs_left[0] <= 0:
            return "shrink budget"
        return None

    def check_schedule(schedule: Schedule) -> None:
        state.drawn += 1
        key = schedule.key()
        run = cache.get(key)
        if run is None:
            bound = over_budget()
            if bound is not None:
                state.skipped += 1
                if bound == "max_seconds":
                    state.stopped_by = bound
                if not first_seen:
                    raise _BudgetSpent  # nothing found to shrink: stop drawing now
                reject()  # not run while shrinking: Hypothesis neither counts it as passed nor shrinks toward it
            if first_seen:
                shrink_runs_left[0] -= 1
            run = execute(schedule)
            if run.failed and run.codes not in confirmed_codes:
                again = execute(schedule)  # first time these codes fail: the agent's, every time?
                if again.codes == run.codes and again.failed:
                    confirmed_codes.add(run.codes)
                else:
                    run.flaky = True
                    state.flaky.append(Flake(schedule, run.codes, () if again.passed else again.codes,
                                             run.evidence_dir))
            cache[key] = run
        if run.failed:
            if run.codes not in first_seen:
                first_seen[run.codes] = (len(cache), schedule)
                if state.failing[0] != run.codes:
                    state.also_failed.append(run)
            if run.codes == state.failing[0]:
                raise ScheduleFailed(run)

    digest = hashlib.sha256(json.dumps(
        {"base": base.model_dump(mode="json", exclude={"source"}), "agent": agent_label(agent),
         "client_timeout": client_timeout, "max_faults": max_faults}, sort_keys=True).encode()).digest()
    check_schedule._hypothesis_internal_add_digest = digest  # type: ignore[attr-defined]  # a database key per search
    test = settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck),
        database=DirectoryBasedExampleDatabase(str(database)) if database is not None else None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink), report_multiple_bugs=False,
        print_blob=False, derandomize=False,
    )(given(schedules(base, client_timeout=client_timeout, max_faults=max_faults))(check_schedule))
    if seed is not None:
        test = seed_decorator(seed)(test)

    failures: list[ScheduleFailed] = []
    try:
        test()
    except Flaky as exc:  # Hypothesis replays from our cache: this means a schedule drew differently
        raise HarnessError(f"exploration of {base.name}: Hypothesis saw the same draw behave differently "
                           f"({type(exc).__name__}), a bug of the strategies; evidence so far: {folder}") from None
    except ScheduleFailed as exc:
        failures = [exc]
    except _BudgetSpent:
        state.stopped_by = "max_seconds"
    except Unsatisfiable:  # every schedule was skipped (a bound before the first run)
        state.stopped_by = "max_seconds"
    except KeyboardInterrupt:  # Ctrl-C: the engine stopped what it started; say what was seen so far
        state.stopped_by = "interrupted"
        state.seconds = time.monotonic() - began
        return state
    if failures and state.stopped_by == "examples":
        state.stopped_by = "failure"  # Hypothesis stops drawing at the first failure, to shrink it
    elif state.stopped_by == "examples" and state.drawn < examples:
        state.stopped_by = "exhausted"  # Hypothesis ran out of distinct schedules

    from harness.checker.registry import RULES

    names = {rule.code: rule.name for rule in RULES.values()}
    names.setdefault("X001", "scenario-expectations")
    for failure in failures:
        shrunk = failure.run
        at, first = first_seen.get(shrunk.codes, (state.runs, shrunk.schedule))
        state.found.append(Found(shrunk.schedule, shrunk.codes, {c: names.get(c, c) for c in shrunk.codes},
                                 at, first, shrunk.evidence_dir))
    _confirm(state, base, scenario_of, run_one, reproducer, client_timeout)
    _tidy(state)
    state.seconds = time.monotonic() - began
    return state


def _scenario_name(path: Path, base: str) -> str:
    stem = path.stem
    return stem[:MAX_NAME_LENGTH] if re.fullmatch(NAME_PATTERN, stem) else f"{base}_found"[:MAX_NAME_LENGTH]


def describe_found(state: Exploration, found: Found, base: Scenario, client_timeout: float) -> str:
    """The reproducer's description: how it was found, which rules it trips, the schedule."""
    rules = ", ".join(f"{code} {name}" for code, name in found.rule_names.items())
    seed = f", --seed {state.seed}" if state.seed is not None else ""
    lines = [
        f"Found by exploring {base.name} (python -m harness explore{seed}) with the agent `{state.agent}`:",
        f"schedule {found.first_seen_at} of the search failed it; shrunk to the schedule below.",
        f"It trips {rules}.",
        "Schedule:",
        *[f"  - {line}" for line in found.schedule.summary()],
        "Expectations are left to the checker's rules: this schedule decides what a correct agent can reach.",
        f"Client timeout: hold times were drawn around {client_timeout:g} s (--client-timeout).",
        "",
        f"Base scenario {base.name}: {base.description.strip().splitlines()[0]}",
    ]
    return "\n".join(lines) + "\n"


def _confirm(state: Exploration, base: Scenario, scenario_of: Callable[..., Scenario],
             run_one: Callable[[Scenario], ScenarioResult], reproducer: Path | None, client_timeout: float) -> None:
    """Write each found schedule as a scenario file, load it back and run it once more."""
    from harness.scenario import load, scenario_yaml

    path = reproducer if reproducer is not None else state.folder / "found.yaml"
    for found in state.found:
        scenario = scenario_of(found.schedule, name=_scenario_name(path, base.name),
                               description=describe_found(state, found, base, client_timeout))
        draft = state.folder / "reproducer.yaml"
        draft.write_text(scenario_yaml(scenario), encoding="utf-8")
        t0 = time.perf_counter()
        result = run_one(load(draft))  # as a user will: from the file
        state.runs += 1
        state.run_seconds += time.perf_counter() - t0
        state.agent_seconds += sum(run.seconds for run in result.agent_runs)
        found.confirmation_codes = tuple(sorted(result.verdict.codes))
        found.confirmation_evidence = result.evidence_dir if result.evidence_kept else None
        found.confirmed = not result.passed and not result.incomplete and found.confirmation_codes == found.codes
        if not found.confirmed:
            again = ", ".join(found.confirmation_codes) or ("INCOMPLETE" if result.incomplete else "passed")
            draft.write_text(scenario_yaml(scenario.model_copy(update={"description": (
                f"FLAKY: the rerun before writing gave {again}, not {', '.join(found.codes)}.\n"
                + scenario.description)})), encoding="utf-8")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(draft, path)
        except OSError as exc:  # the search's outcome stays in the evidence folder
            raise HarnessError(f"cannot write the reproducer to {path}: {exc.strerror or exc}; it is at {draft} "
                               "(give --reproducer a writable path)") from None
        found.reproducer = path.resolve()


def _tidy(state: Exploration) -> None:
    """Keep the evidence that explains the outcome (the shrunk failures, their confirmations, the flakes);
    the failing runs met on the way down are removed."""
    keep = {f.evidence_dir for f in state.found} | {f.confirmation_evidence for f in state.found} | \
        {f.evidence_dir for f in state.flaky} | {r.evidence_dir for r in state.incomplete + state.also_failed}
    runs_root = state.folder / "runs"
    if runs_root.is_dir():
        for folder in runs_root.iterdir():
            if folder not in keep:
                remove_tree(folder)
