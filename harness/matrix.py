"""The certification matrix: every agent against every scenario, judged against expected outcomes.

The expected outcomes live in one data file (`harness/expected_outcomes.yaml`): the reference
agent must pass every scenario (a failure is a false alarm); each wrong agent must fail the scenarios
that target its flaw, with the named rule codes among the findings (a miss lowers the catch rate).

A team certifies its own agents beside them: any command (`agent_spec`: a bundled name, a command,
or `LABEL=COMMAND`), whose cells pass or fail with the rule codes found, no expectation asserted.
Every cell also carries what the wire and the ledger show (`ScenarioResult.facts`: effects
committed, attempts on the wire, key behaviour), whatever the mode the run was judged in.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import yaml

from harness.contract import BLACK_BOX_MODE, EVENTS_MODE, agent_words
from harness.errors import AgentError
from harness.resources import catalogue, expected_outcomes_file
from harness.results.matrix import REFERENCE, Cell, Matrix

EXPECTED_FILE = expected_outcomes_file()  # package data (harness.resources)
WRONG_AGENT_MODULE = "harness.agents.wrong."


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


LABEL = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)


@dataclass(frozen=True)
class AgentSpec:
    """One row of the matrix: its label, the command run, and whether it is a bundled agent (the reference
    or a wrong agent, judged against the expected outcomes) or a team's own (judged on its verdict alone)."""

    label: str
    command: str
    bundled: bool


def agent_spec(value: str, expected: Expectations, *, in_image: bool = False) -> AgentSpec:
    """`--agent`'s value: a bundled agent's name (`reference`, `idle`, ...), `LABEL=COMMAND`, or a command
    (labelled by itself). A single word that is neither a bundled name nor a program on PATH is an error
    naming the bundled agents (a typo must not run as a command and fail every cell); `in_image`: the
    command runs in a container (`--agent-image`), whose PATH is not this machine's, so it is not looked up."""
    if value in expected.agents:
        return AgentSpec(value, expected.command(value), True)
    labelled = LABEL.match(value)
    label, command = (labelled.group(1), labelled.group(2)) if labelled else (value, value)
    try:
        words = agent_words(command)
    except ValueError as exc:
        raise AgentError(f"--agent {value!r}: the agent command {exc}") from None
    if labelled and label in expected.agents:
        raise AgentError(f"--agent {value!r}: the label {label!r} is a bundled agent's name; choose another "
                            f"(bundled: {', '.join(expected.agents)})")
    if not labelled and not in_image and len(words) == 1 and "/" not in command and shutil.which(command) is None:
        hint = difflib.get_close_matches(value, expected.agents, n=1)
        raise AgentError(
            f"--agent {value!r} is neither a bundled agent{f' (did you mean {hint[0]!r}?)' if hint else ''} nor a "
            f"program on PATH; give a bundled name ({', '.join(expected.agents)}), a command such as "
            f"'python my_agent.py', or LABEL=COMMAND")
    return AgentSpec(label, command, False)


def agent_specs(values: list[str] | list[AgentSpec], expected: Expectations, *,
                in_image: bool = False) -> list[AgentSpec]:
    """`agent_spec` of each value (an `AgentSpec` is kept as it is), each once; two agents under one label
    are an error."""
    specs = [v if isinstance(v, AgentSpec) else agent_spec(v, expected, in_image=in_image) for v in values]
    seen: dict[str, AgentSpec] = {}
    for spec in specs:
        if spec.label in seen and seen[spec.label] != spec:
            raise AgentError(f"--agent: the label {spec.label!r} names two agents ({seen[spec.label].command!r} "
                                f"and {spec.command!r}); give each its own LABEL=COMMAND")
        seen[spec.label] = spec
    return list(dict.fromkeys(specs))


def run_cell(agent: str | AgentSpec, scenario_path: str, evidence_root: str, expected: Expectations | None = None,
             black_box: bool = False, image: str | None = None, agent_timeout: float | None = None) -> Cell:
    """Run one agent on one scenario (in this process, reusing its proxy); `agent` is a bundled agent's name or
    an `AgentSpec`. `black_box`: judge the run from the wire and the ledger alone. `image`: run the agent's
    command in a container of that image (a bundled agent's `python` is the image's `python3`). `agent_timeout`:
    the agent's time limit over the scenario's."""
    from harness import coverage
    from harness.engine import run_scenario
    from harness.results.verdict import EXPECTATION_CODE
    from harness.scenario import ContainerAgent, agent_label, container_agent, load

    expected = expected or load_expectations()
    spec = agent if isinstance(agent, AgentSpec) else agent_spec(agent, expected, in_image=image is not None)
    scenario = load(scenario_path)
    codes_wanted = expected.caught_by.get(spec.label, {}).get(scenario.name) if spec.bundled else None
    mode = BLACK_BOX_MODE if black_box or scenario.agent_log == "none" else EVENTS_MODE
    run_as: str | ContainerAgent = spec.command
    if image is not None:
        words = agent_words(spec.command)
        if spec.bundled and words[0] == "python":  # Debian's python3 has no `python`
            words[0] = "python3"
        run_as = container_agent(image, shlex.join(words))
    try:
        result = run_scenario(scenario, agent=run_as, evidence_root=Path(evidence_root),
                              keep_evidence="failed", black_box=black_box, agent_timeout=agent_timeout)
    except Exception as exc:  # noqa: BLE001 - a broken cell is reported, the matrix goes on
        return Cell(spec.label, scenario.name, False, [], "", codes_wanted, error=f"{type(exc).__name__}: {exc}",
                    command=agent_label(run_as), bundled=spec.bundled, mode=mode)
    codes = sorted({f.code for f in result.verdict.findings}  # X001 findings are the verdict's
                   | ({EXPECTATION_CODE} if result.expectation_failures else set()))
    evidence = str(result.evidence_dir) if result.evidence_kept else ""
    return Cell(spec.label, scenario.name, result.passed, codes, evidence, codes_wanted, command=result.agent,
                bundled=spec.bundled, mode=result.verdict.mode, facts=dict(result.facts),
                exercised=coverage.entry(result.verdict))


def run_matrix(agents: list[str] | list[AgentSpec], scenario_paths: list[Path], evidence_root: Path, *,
               jobs: int = 1, black_box: bool = False, progress: Callable[[Cell], None] | None = None,
               image: str | None = None) -> Matrix:
    """Every agent against every scenario. `agents`: `--agent` values (bundled names, commands, LABEL=COMMAND)
    or `AgentSpec`s; `black_box`: judge every run from the wire and the ledger alone; `progress(cell)` is called
    as each cell ends (in the order they end; the matrix keeps the scenario-major order); `image`: every agent
    runs in a container of it (`--agent-image`)."""
    expected = load_expectations()
    specs = agent_specs(agents, expected, in_image=image is not None)
    # scenario-major: consecutive runs share destinations, so the warm pool reuses their process
    work = [(a, str(p), str(evidence_root), expected, black_box, image) for p in scenario_paths for a in specs]
    told = progress or (lambda cell: None)
    if jobs <= 1:
        cells = []
        for w in work:
            cells.append(run_cell(*w))
            told(cells[-1])
        return Matrix(cells)
    # one process per job: each has its own embedded proxy (mitmproxy allows one per process)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_cell, *w) for w in work]
        for future in as_completed(futures):
            told(future.result())
        return Matrix([f.result() for f in futures])


def unexpected(cell: Cell) -> bool:
    """A cell the progress line counts as a failure: one that makes the matrix fail (a miss, a false alarm,
    a team agent's failure, a cell that never ran), not a wrong agent caught as expected."""
    return bool(cell.error) or cell.verdict in ("missed", "false-alarm", "fail")


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def coverage_scenarios(names: Iterable[str] | None = None) -> list[Path]:
    """The catalogue's scenario files ``measure_coverage`` runs: all of them, or those of ``names``."""
    wanted = set(names) if names is not None else None
    return [path for path in catalogue() if wanted is None or path.stem in wanted]


def measure_coverage(evidence_root: Path, names: Iterable[str] | None = None, *,
                     progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, list[str]]]:
    """Run the reference agent over the catalogue (or ``names``) and say what each scenario exercised
    (``harness.coverage`` keeps it). ``progress(done, failures)`` after each scenario, as the progress line takes
    it (failures stay 0: the first one stops the measurement)."""
    from harness import coverage
    from harness.contract import REFERENCE_AGENT
    from harness.engine import run_scenario
    from harness.scenario import load as load_scenario

    measured: dict[str, dict[str, list[str]]] = {}
    for path in coverage_scenarios(names):
        result = run_scenario(load_scenario(path), agent=REFERENCE_AGENT, evidence_root=evidence_root)
        if result.incomplete or not result.passed:
            raise RuntimeError(f"the reference agent did not pass {path.stem} ({result.evidence_dir}): coverage is "
                               f"measured on passing runs only")
        measured[path.stem] = coverage.entry(result.verdict)
        if progress is not None:
            progress(len(measured), 0)
    return measured
