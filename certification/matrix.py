"""The SDK certification matrix: each connector (one real SDK configuration, ``connectors/NAME.py``)
against the four fault scenarios of its API (``scenarios/<api>_<fault>.yaml``), judged in black-box mode
through the real engine, fault proxy and generic destination; ``expected.yaml`` says what each cell is.

``python -m certification`` runs it, compares every cell with ``expected.yaml`` and writes the published
``MATRIX.md`` and ``matrix.json``; ``tests/certification`` asserts the same cells in CI. The published
table (docs/matrix.md, "Real SDKs certified") is ``readme_table()`` of ``expected.yaml``, so what the docs say is
what CI asserts.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml
from packaging.utils import canonicalize_name

from certification.environments import Environment, environment, harness_environment
from certification.npm import NodeEnvironment, is_npm, npm_environment

ROOT = Path(__file__).resolve().parent
EXPECTED_FILE = ROOT / "expected.yaml"
CONNECTORS_DIR = ROOT / "connectors"
SCENARIOS_DIR = ROOT / "scenarios"
# in a checkout the run rewrites the published tables; from an installed wheel, files in the caller's folder
IN_CHECKOUT = (ROOT.parent / "pyproject.toml").is_file()
MARKDOWN_FILE = ROOT / "MATRIX.md" if IN_CHECKOUT else Path("MATRIX.md")
JSON_FILE = ROOT / "matrix.json" if IN_CHECKOUT else Path("matrix.json")
README_FILE = ROOT.parent / "docs" / "matrix.md"  # the published tables (the README links to them)
# the scenarios every API has, in the table's column order, with the column's header
FAULTS = {"response_lost": "answer lost after commit", "server_error_after_commit": "500 after commit",
          "rate_limited": "429 with Retry-After: 2", "timeout_late_success": "answer late, past the timeout"}
# the same faults in a sentence: "makes a duplicate after a lost answer, a 500 and a timeout"
FAULTS_SAID = {"response_lost": "a lost answer", "server_error_after_commit": "a 500 after commit",
               "rate_limited": "a 429", "timeout_late_success": "a timeout"}
# the package whose version a row names, for each connector's `sdk`
SDK_PACKAGES = {"stripe": "stripe", "openai": "openai", "anthropic": "anthropic", "boto3": "boto3",
                "urllib3": "urllib3", "requests": "requests", "httpx": "httpx", "tenacity": "tenacity",
                "backoff": "backoff", "mcp": "mcp"}
# the TypeScript rows: their SDK an npm package (certification/npm.py), their connector a CommonJS script beside the
# Python ones, and the packages a connector of that SDK also needs (at their `certified:` release, else the newest)
SDK_PACKAGES |= {"openai-node": "npm:openai", "ai-sdk": "npm:ai", "anthropic-node": "npm:@anthropic-ai/sdk",
                 "mcp-node": "npm:@modelcontextprotocol/sdk", "langgraph-js": "npm:@langchain/langgraph"}
NPM_COMPANIONS = {"npm:ai": ("npm:@ai-sdk/openai",), "npm:@langchain/langgraph": ("npm:@langchain/core",)}
# A cell's agent time limit, over its scenario's 30 s: a cell judges what the client or framework retried, not how fast
# it starts, and a framework's imports alone take seconds (crewAI's over 30 s on a loaded machine: a false X001). No
# expected cell is a run stopped at the limit, so a correct client never waits for it.
CELL_AGENT_TIMEOUT = 120.0
README_BEGIN = "<!-- sdk-matrix: written by `python -m certification --readme` from certification/expected.yaml -->"
README_END = "<!-- /sdk-matrix -->"


@dataclass(frozen=True)
class CellOutcome:
    """One cell as the table says it: the verdict, the rule codes found, the distinct effects committed,
    the writes on the wire and the key behaviour across them."""

    verdict: str  # pass | fail
    codes: tuple[str, ...] = ()
    effects: int = 1
    attempts: int = 1
    key: str = "-"
    # the retry layer that made each retry, in the agent's own words (``retry_layers``): a framework agent whose
    # log says which of its framework's layers ran the tool again (crewAI's), for the second attempt on
    retried_by: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, cell: Any) -> CellOutcome:
        """A cell as expected.yaml or matrix.json holds it (a KeyError or TypeError when it is not one)."""
        return cls(verdict=cell["verdict"], codes=tuple(cell.get("codes") or ()), effects=cell["effects"],
                   attempts=cell["attempts"], key=cell["key"], retried_by=tuple(cell.get("retried_by") or ()))

    def said(self) -> str:
        """The cell in the README's words, e.g. ``FAIL H040 H041 X001: 2 effects, 2 attempts, no key``, or
        ``... 2 attempts (the 2nd run again by crewAI's ToolUsage), no key``."""
        head = "PASS" if self.verdict == "pass" else " ".join(["FAIL", *self.codes])
        plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"  # noqa: E731
        key = "one key" if self.key.startswith("one key") else self.key  # "one key on N attempts": N is said
        by = ", ".join(f"the {ordinal(n)} {who}" for n, who in enumerate(self.retried_by, 2) if who)
        return f"{head}: {plural(self.effects, 'effect')}, {plural(self.attempts, 'attempt')}" + \
            (f" ({by})" if by else "") + f", {key}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


@dataclass(frozen=True)
class Connector:
    """One row: the connector script, the SDK it certifies, its API, its setting in a few words, the
    connector that passes all four faults where this one does not, and its expected cells."""

    name: str
    sdk: str
    api: str
    setting: str
    cells: dict[str, CellOutcome]
    passes_with: str | None = None
    certified: str | None = None  # the release of its package the expected cells were measured with
    # the environment the connector runs in (certification.environments, certification.npm); None: the one made
    # for `certified`
    environment: Environment | NodeEnvironment | None = None
    companions: tuple[str, ...] = ()  # npm:NAME[@VERSION] of the other packages its script needs (NPM_COMPANIONS)

    @property
    def script(self) -> Path:
        return CONNECTORS_DIR / f"{self.name}.{'cjs' if is_npm(self.package) else 'py'}"

    @property
    def package(self) -> str:
        return SDK_PACKAGES[self.sdk]

    @property
    def requirement(self) -> str:
        if is_npm(self.package):
            return f"{self.package}@{self.certified}" if self.certified else self.package
        return f"{self.package}=={self.certified}" if self.certified else self.package

    @property
    def command(self) -> str:
        """What runs: the environment's interpreter (else this one) on the script, from any folder."""
        if isinstance(self.environment, NodeEnvironment):
            return self.environment.command(self.script)
        python = self.environment.python if self.environment is not None else sys.executable
        return f"{python} {self.script}"

    def ready(self) -> Connector:
        """This connector in its environment: the one given, else the one made (once) for its certified release."""
        if self.environment is not None:
            return self
        if is_npm(self.package):
            return self.in_environment(npm_environment([self.requirement, *self.companions]))
        return self.in_environment(environment(self.requirement))

    @property
    def shown_command(self) -> str:
        """The command as the published table shows it, from the repository's root."""
        return f"{'node' if is_npm(self.package) else 'python'} certification/connectors/{self.script.name}"

    def scenario(self, fault: str) -> Path:
        return SCENARIOS_DIR / f"{self.api}_{fault}.yaml"

    @property
    def sdk_version(self) -> str:
        if self.environment is not None:
            return f"{self.sdk} {self.environment.version(self.package)}"
        return f"{self.sdk} {self.certified or version(self.package)}"

    def in_environment(self, environment: Environment | NodeEnvironment) -> Connector:
        return replace(self, environment=environment)


def load_expected(path: Path = EXPECTED_FILE) -> dict[str, Connector]:
    """``expected.yaml``: connector name -> its row; a malformed entry is a ValueError naming it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    certified = {str(k): str(v) for k, v in (data.get("certified") or {}).items()}
    out: dict[str, Connector] = {}
    for name, spec in (data.get("connectors") or {}).items():
        try:
            cells = {fault: CellOutcome.from_dict(cell) for fault, cell in spec["cells"].items()}
            package = SDK_PACKAGES[spec["sdk"]]
            companions = tuple(f"{p}@{certified[p]}" if p in certified else p for p in NPM_COMPANIONS.get(package, ()))
            out[name] = Connector(name, spec["sdk"], spec["api"], spec["setting"], cells, spec.get("passes_with"),
                                  certified.get(package), companions=companions)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: connector {name}: {type(exc).__name__} {exc}") from None
    return out


def work(connectors: Iterable[Connector]) -> list[tuple[Connector, str]]:
    """Every cell to run: each connector on each fault of its API, in the table's order."""
    return [(c, fault) for c in connectors for fault in FAULTS]


def run_cell(connector: Connector, fault: str, evidence_root: str) -> Any:
    """Run one cell through the real engine, in black-box mode (``harness.results.matrix.Cell``)."""
    from harness.matrix import AgentSpec
    from harness.matrix import run_cell as harness_cell

    spec = AgentSpec(connector.name, connector.ready().command, bundled=False)
    return harness_cell(spec, str(connector.scenario(fault)), evidence_root, black_box=True,
                       agent_timeout=CELL_AGENT_TIMEOUT)


def observed(cell: Any) -> CellOutcome:
    """What a run's cell shows, in ``expected.yaml``'s terms."""
    facts = cell.facts or {}
    return CellOutcome(verdict="pass" if cell.passed else "fail", codes=tuple(cell.codes),
                       effects=int(facts.get("effects", -1)), attempts=int(facts.get("attempts", -1)),
                       key=str(facts.get("key_behaviour", "-")),
                       retried_by=tuple(str(who) for who in facts.get("retry_layers") or ()))


def difference(connector: Connector, fault: str, cell: Any) -> str | None:
    """Why a run's cell is not its expected one (None when it is)."""
    if cell.error:
        return f"{connector.name} on {connector.api}_{fault}: the cell did not run: {cell.error}"
    got, want = observed(cell), connector.cells[fault]
    if got == want:
        return None
    return (f"{connector.name} on {connector.api}_{fault}: expected {want.said()}; got {got.said()} "
            f"(evidence: {cell.evidence or 'not kept'})")


@dataclass
class Run:
    """A run of the matrix: each (connector, fault) with the harness's cell."""

    cells: list[tuple[Connector, str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def differences(self) -> list[str]:
        return [d for c, f, cell in self.cells if (d := difference(c, f, cell)) is not None]


def run(connectors: Sequence[Connector], evidence_root: Path, jobs: int = 2) -> Run:
    """Every cell of ``connectors``; ``jobs`` processes, each with its own fault proxy."""

    todo = work(connectors)
    started = time.perf_counter()
    args = ([c for c, _ in todo], [f for _, f in todo], [str(evidence_root)] * len(todo))
    if jobs <= 1:
        cells = [run_cell(*a) for a in zip(*args, strict=True)]
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            cells = list(pool.map(run_cell, *args))
    return Run([(c, f, cell) for (c, f), cell in zip(todo, cells, strict=True)], time.perf_counter() - started)


# -- the tables ---------------------------------------------------------------------------------------

def _row_head(connector: Connector) -> str:
    from harness.report import markdown_cell

    return f"`{connector.name}` {markdown_cell(f'({connector.sdk_version}): {connector.setting}')}"


def pivot_table(rows: Sequence[tuple[Connector, dict[str, CellOutcome]]]) -> list[str]:
    """One row per connector, one column per fault: the verdict, effects, attempts and key behaviour."""
    from harness.report import markdown_cell

    lines = ["| connector (SDK): setting | " + " | ".join(FAULTS.values()) + " |", "|---" * (1 + len(FAULTS)) + "|"]
    for connector, cells in rows:
        lines.append("| " + " | ".join([_row_head(connector),
                                         *(markdown_cell(cells[f].said()) for f in FAULTS)]) + " |")
    return lines


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def failures_said(connector: Connector) -> str:
    """What goes wrong, in words: "makes a duplicate after a lost answer and a timeout, and gives up on a 429"."""
    duplicate = [FAULTS_SAID[f] for f, c in connector.cells.items() if c.effects > 1]
    gave_up = [FAULTS_SAID[f] for f, c in connector.cells.items() if c.effects == 0]
    early = [FAULTS_SAID[f] for f, c in connector.cells.items() if "H042" in c.codes]
    told_failed = [FAULTS_SAID[f] for f, c in connector.cells.items() if c.effects == 1 and "H049" in c.codes]
    other = [FAULTS_SAID[f] for f, c in connector.cells.items()
             if c.verdict == "fail" and c.effects == 1 and not {"H042", "H049"} & set(c.codes)]
    said = ([f"makes a duplicate after {_listed(duplicate)}"] if duplicate else []) + (
        [f"gives up on {_listed(gave_up)}"] if gave_up else []) + (
        [f"retries {_listed(early)} before its Retry-After"] if early else []) + (
        [f'tells its caller "failed" after {_listed(told_failed)} while the effect exists'] if told_failed
        else []) + (
        [f"fails {_listed(other)}"] if other else [])
    return "; ".join(said)


def safe_settings(connectors: dict[str, Connector]) -> list[str]:
    """For each connector that fails a fault, what goes wrong, and the connector that passes all four."""
    lines = []
    for c in connectors.values():
        if c.passes_with is not None:
            safe = connectors[c.passes_with]
            lines.append(f"- `{c.name}` {failures_said(c)}: `{safe.name}` passes all four ({safe.setting}).")
    return lines


def readme_table(connectors: dict[str, Connector]) -> str:
    """The README's section between its markers: the expected matrix and the settings that make it pass."""
    lines = [README_BEGIN, "", *pivot_table([(c, c.cells) for c in connectors.values()]), "",
             *safe_settings(connectors), "", README_END]
    return "\n".join(lines)


def rewrite_readme(connectors: dict[str, Connector], path: Path = README_FILE) -> bool:
    """Put ``readme_table()`` between the README's markers; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:start] + readme_table(connectors) + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def markdown(result: Run, connectors: dict[str, Connector]) -> str:
    """MATRIX.md: the run's pivot table, then every cell with its retry spacing and the command run."""
    from harness.report import markdown_cell

    lines = ["<!-- written by `python -m certification`; regenerate it, do not edit it -->", "",
             "# SDK certification matrix", "",
             "Each cell ran the real SDK (the row's connector script) through the fault proxy against the "
             "generic destination of its API, and was judged in black-box mode: from the proxy journal and "
             "the effect ledger alone (docs/checker.md). A verdict is PASS, or FAIL with the rule codes found; "
             "effects are the distinct effects the destination committed (each scenario expects 1), attempts "
             "the writes on the wire. docs/sdks.md says why each SDK behaves as it does.", "",
             f"Run on {time.strftime('%Y-%m-%d')}, each connector in an environment holding its SDK at the release its "
             "row names (`certified:` in certification/expected.yaml; certification/environments.py). A release's "
             "row again: `python -m certification --sdk NAME==VERSION`.", "",
             f"{len(result.cells)} cells in {result.seconds:.0f} s; "
             f"{sum(not d for d in [difference(c, f, cell) for c, f, cell in result.cells])} as expected "
             f"(certification/expected.yaml).", ""]
    rows: dict[str, tuple[Connector, dict[str, CellOutcome]]] = {}
    for c, f, cell in result.cells:
        rows.setdefault(c.name, (c, {}))[1][f] = observed(cell)
    lines += pivot_table(list(rows.values()))
    lines += ["", "## Every cell", "",
              "| connector | scenario | verdict | effects | attempts | key behaviour | retry spacing (s) |",
              "|---|---|---|---|---|---|---|"]
    for c, f, cell in result.cells:
        got = observed(cell)
        gaps = [g for intent in (cell.facts or {}).get("intents", []) for g in intent.get("retry_gaps", [])]
        verdict = "PASS" if got.verdict == "pass" else " ".join(["FAIL", *got.codes])
        values = [c.name, f"{c.api}_{f}", verdict, str(got.effects), str(got.attempts), got.key,
                  ", ".join(f"{g:.2f}" for g in gaps) or "-"]
        lines.append("| " + " | ".join(markdown_cell(v) for v in values) + " |")
    lines += ["", "## Connectors", "", "| connector | SDK | setting | command |", "|---|---|---|---|"]
    for c in connectors.values():
        if c.name in rows:
            lines.append("| " + " | ".join(markdown_cell(v) for v in
                                           (c.name, c.sdk_version, c.setting, c.shown_command)) + " |")
    return "\n".join(lines) + "\n"


def as_json(result: Run) -> dict[str, Any]:
    """matrix.json: every cell with what the run showed (verdict, codes, effects, attempts, key behaviour,
    retry spacing) and whether that is its expected outcome."""
    cells = []
    for c, f, cell in result.cells:
        got = observed(cell)
        cells.append({"connector": c.name, "sdk": c.sdk_version, "setting": c.setting, "command": c.shown_command,
                      "api": c.api, "scenario": f"{c.api}_{f}", "fault": f, "verdict": got.verdict,
                      "codes": list(got.codes), "effects": got.effects, "attempts": got.attempts, "key": got.key,
                      "retry_gaps": [g for i in (cell.facts or {}).get("intents", []) for g in i.get("retry_gaps", [])],
                      "as_expected": difference(c, f, cell) is None, "error": cell.error})
    return {"seconds": round(result.seconds, 1), "cells": cells}


def write(result: Run, connectors: dict[str, Connector], markdown_path: Path = MARKDOWN_FILE,
          json_path: Path = JSON_FILE) -> None:
    markdown_path.write_text(markdown(result, connectors), encoding="utf-8")
    json_path.write_text(json.dumps(as_json(result), indent=1) + "\n", encoding="utf-8")


# -- the framework agents -----------------------------------------------------------------------------
# Agents built on agent frameworks (harness/agents/frameworks/), each correct and with its framework's common
# wrong retry setting, against fault scenarios of the catalogue (and scenarios/frameworks/). They write an
# audit log (harness.instrument), so they are judged by the full checker, not in black-box mode: a wrong
# one fails on the rule that names its flaw (H010 a retry after an unknown outcome without justification,
# H016 two effects for one intent, H011 a retry sooner than Retry-After).

FRAMEWORK_SCENARIOS_DIR = SCENARIOS_DIR / "frameworks"
FRAMEWORK_PACKAGES = {"langgraph": "langgraph", "openai-agents": "openai-agents", "pydantic-ai": "pydantic-ai-slim",
                      "smolagents": "smolagents", "agno": "agno", "crewai": "crewai",
                      "langchain-mcp-adapters": "langchain-mcp-adapters"}
FRAMEWORKS_README_BEGIN = ("<!-- framework-matrix: written by `python -m certification --readme` from "
                           "certification/expected.yaml -->")
FRAMEWORKS_README_END = "<!-- /framework-matrix -->"


@dataclass(frozen=True)
class Column:
    """A column of the framework table: the scenario (a catalogue name, or a file under scenarios/) and its
    header; ``raised_by``: who raises its fault, the fault proxy (a network fault, every row) or the row's
    scripted model (``model``: a framework's own fault, only the rows whose command raises it have the cell)."""

    name: str
    scenario: str
    header: str
    raised_by: str = "proxy"

    @property
    def path(self) -> Path:
        if self.scenario.endswith(".yaml"):
            return SCENARIOS_DIR / self.scenario
        from harness.resources import catalogue_dir

        return catalogue_dir() / f"{self.scenario}.yaml"


@dataclass(frozen=True)
class FrameworkAgent:
    """One row: the agent's command, its framework, the setting in a few words, the correct row this wrong
    one is the twin of, and its expected cells (column name -> outcome)."""

    name: str
    framework: str
    command: str
    setting: str
    cells: dict[str, CellOutcome]
    passes_with: str | None = None
    agent_log: str = "events"  # events: an audit log; otel: spans only, judged from HARNESS_TRACE_FILE
    # NAME==VERSION of each package of its framework it runs with: as the cells were measured (expected.yaml's
    # frameworks.certified), or with a release given to `--framework NAME==VERSION` in its package's place (at())
    certified: tuple[str, ...] = ()
    adapter: str | None = None  # the framework's own MCP adapter the agent calls tools through (MCP columns only)
    environment: Environment | None = None  # made for `certified` (ready()); None: made when the command is asked

    @property
    def package(self) -> str:
        return FRAMEWORK_PACKAGES[self.framework]

    @property
    def framework_version(self) -> str:
        if self.environment is not None:
            return f"{self.framework} {self.environment.version(self.package)}"
        pins = {canonicalize_name(r.split("==", 1)[0].split("[", 1)[0]): r.split("==", 1)[1] for r in self.certified}
        return f"{self.framework} {pins.get(canonicalize_name(self.package)) or version(self.package)}"

    @property
    def run_command(self) -> str:
        """What runs: the interpreter of the environment holding the certified releases (or, with none
        certified, this one), from any folder."""
        python = (self.environment or harness_environment(self.certified)).python if self.certified else sys.executable
        return self.command.replace("python ", f"{python} ", 1)

    def ready(self) -> FrameworkAgent:
        """This agent with its environment made (once, cached): make it before the cells' processes, so an
        environment that cannot be made is one line (EnvironmentError_) and not a traceback out of the pool."""
        if self.environment is not None or not self.certified:
            return self
        return replace(self, environment=harness_environment(self.certified))

    def at(self, release: str) -> FrameworkAgent:
        """This agent on another release of its framework's package (``NAME==VERSION``), the other packages of
        its certified set as they are: what ``--framework NAME==VERSION`` runs, expected.yaml unedited."""
        package = canonicalize_name(self.package)
        others = [r for r in self.certified if canonicalize_name(r.split("==", 1)[0].split("[", 1)[0]) != package]
        return replace(self, certified=(f"{self.package}=={release}", *others), environment=None)


def load_frameworks(path: Path = EXPECTED_FILE) -> tuple[dict[str, Column], dict[str, FrameworkAgent]]:
    """``expected.yaml``'s ``frameworks``: its columns and its agents; a malformed entry is a ValueError
    naming it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")).get("frameworks") or {}
    certified = {str(k): tuple(map(str, v)) for k, v in (data.get("certified") or {}).items()}
    columns: dict[str, Column] = {}
    agents: dict[str, FrameworkAgent] = {}
    try:
        for name, spec in (data.get("columns") or {}).items():
            columns[name] = Column(name, spec["scenario"], spec["header"], spec.get("raised_by", "proxy"))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: frameworks.columns: {type(exc).__name__} {exc}") from None
    for name, spec in (data.get("agents") or {}).items():
        try:
            cells = {column: CellOutcome.from_dict(cell) for column, cell in spec["cells"].items()}
            agents[name] = FrameworkAgent(name, spec["framework"], spec["command"], spec["setting"], cells,
                                          spec.get("passes_with"), spec.get("agent_log", "events"),
                                          certified.get(spec["framework"], ()), spec.get("adapter"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: frameworks.agents.{name}: {type(exc).__name__} {exc}") from None
    return columns, agents


def run_framework_cell(agent: FrameworkAgent, column: Column, evidence_root: str) -> Any:
    """Run one framework cell through the real engine, judged from the agent's log (its audit log, or its trace
    for an ``agent_log: otel`` row), the wire and the ledger; its facts also say which retry layer made each
    retry, as the log says (``retry_layers``). A failed cell keeps its evidence."""
    import shutil

    from harness.engine import run_scenario
    from harness.results.matrix import Cell
    from harness.results.verdict import EXPECTATION_CODE
    from harness.scenario import load

    scenario = load(column.path)
    try:  # harness.matrix.run_cell's cell, the log as the row says (the scenarios say events), read before it goes
        result = run_scenario(scenario, agent=agent.run_command, evidence_root=Path(evidence_root),
                              keep_evidence="all", agent_log=agent.agent_log, agent_timeout=CELL_AGENT_TIMEOUT)
        layers = retry_layers(Path(result.evidence_dir))
    except Exception as exc:  # noqa: BLE001 - a broken cell is reported, the matrix goes on
        return Cell(agent.name, scenario.name, False, [], "", error=f"{type(exc).__name__}: {exc}",
                    command=agent.run_command, bundled=False)
    codes = sorted({f.code for f in result.verdict.findings} | ({EXPECTATION_CODE} if result.expectation_failures
                                                                 else set()))
    kept = not result.passed
    if not kept:
        shutil.rmtree(result.evidence_dir, ignore_errors=True)
    return Cell(agent.name, scenario.name, result.passed, codes, str(result.evidence_dir) if kept else "",
                command=agent.run_command, bundled=False, mode=result.verdict.mode,
                facts=dict(result.facts) | ({"retry_layers": layers} if layers else {}))


def retry_layers(folder: Path) -> list[str]:
    """Which retry layer made each retry of the run, in the agent's own words: what its layer added to a retry's
    logged ``retry_decision`` (``harness.instrument``'s ``next_retry(decision=)``: after the records' own words and
    "; "), up to its first comma, colon or parenthesis ("run again by crewAI's ToolUsage"). Empty when no retry
    says (the records' words alone name no layer)."""
    from harness.evidence import load_evidence

    said = []
    for event in load_evidence(folder).events:
        if event.get("event") != "attempt" or not event.get("retry_of_attempt_id"):
            continue  # a first attempt: no retry to attribute
        decision = event.get("retry_decision")
        noted = decision.split("; ", 1)[1] if isinstance(decision, str) and "; " in decision else ""
        said.append(noted.replace(":", ",").replace("(", ",").split(",")[0].strip())
    return said if any(said) else []


def framework_difference(agent: FrameworkAgent, column: Column, cell: Any) -> str | None:
    """Why a run's framework cell is not its expected one (None when it is)."""
    if cell.error:
        return f"{agent.name} on {column.scenario}: the cell did not run: {cell.error}"
    got, want = observed(cell), agent.cells[column.name]
    if got == want:
        return None
    return (f"{agent.name} on {column.scenario}: expected {want.said()}; got {got.said()} "
            f"(evidence: {cell.evidence or 'not kept'})")


def run_frameworks(agents: Sequence[FrameworkAgent], columns: dict[str, Column], evidence_root: Path,
                   jobs: int = 2) -> list[tuple[FrameworkAgent, Column, Any]]:
    """Every cell of ``agents`` on every column; ``jobs`` processes, each with its own fault proxy."""
    todo = [(a, c) for a in agents for c in columns.values() if c.name in a.cells]  # a row may skip a column
    args = ([a for a, _ in todo], [c for _, c in todo], [str(evidence_root)] * len(todo))
    if jobs <= 1:
        cells = [run_framework_cell(*a) for a in zip(*args, strict=True)]
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            cells = list(pool.map(run_framework_cell, *args))
    return [(a, c, cell) for (a, c), cell in zip(todo, cells, strict=True)]


def framework_table(columns: dict[str, Column], rows: Sequence[tuple[FrameworkAgent, dict[str, CellOutcome]]]
                    ) -> list[str]:
    """One row per framework agent, one column per scenario."""
    from harness.report import markdown_cell

    lines = ["| agent (framework): setting | " + " | ".join(markdown_cell(c.header) for c in columns.values()) + " |",
             "|---" * (1 + len(columns)) + "|"]
    for agent, cells in rows:
        head = f"`{agent.name}` {markdown_cell(f'({agent.framework_version}): {agent.setting}')}"
        lines.append("| " + " | ".join([head, *(markdown_cell(cells[c].said()) if c in cells else "-"
                                                 for c in columns)]) + " |")
    return lines


def framework_readme_table(columns: dict[str, Column], agents: dict[str, FrameworkAgent]) -> str:
    """The README's framework section between its markers: the expected cells, each agent's command, and for
    each wrong one the rule codes that catch it and the row that passes."""
    lines = [FRAMEWORKS_README_BEGIN, "", *framework_table(columns, [(a, a.cells) for a in agents.values()]), ""]
    for agent in agents.values():
        if agent.passes_with is None:
            continue
        safe = agents[agent.passes_with]
        lines.append(f"- `{agent.name}` (`{agent.command}`) fails on {caught_by(agent)}; "
                     f"`{safe.name}` (`{safe.command}`) passes every column.")
    return "\n".join([*lines, "", FRAMEWORKS_README_END])


def caught_by(agent: FrameworkAgent) -> str:
    """The rules (code and name) that catch a wrong framework agent: "H010 retry-after-unknown-justified, ..."."""
    from harness.checker import RULES

    codes = sorted({code for cell in agent.cells.values() for code in cell.codes} - {"X001"})
    return ", ".join(f"{code} {RULES[code].name}" for code in codes)


def rewrite_readme_frameworks(columns: dict[str, Column], agents: dict[str, FrameworkAgent],
                              path: Path = README_FILE) -> bool:
    """Put ``framework_readme_table()`` between the README's framework markers; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    start = text.index(FRAMEWORKS_README_BEGIN)
    end = text.index(FRAMEWORKS_README_END) + len(FRAMEWORKS_README_END)
    new = text[:start] + framework_readme_table(columns, agents) + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def frameworks_markdown(columns: dict[str, Column], result: Sequence[tuple[FrameworkAgent, Column, Any]]
                        ) -> list[str]:
    """MATRIX.md's framework section: the run's table, then every cell."""
    rows: dict[str, tuple[FrameworkAgent, dict[str, CellOutcome]]] = {}
    for a, c, cell in result:
        rows.setdefault(a.name, (a, {}))[1][c.name] = observed(cell)
    lines = ["", "# Framework agents", "",
             "Each cell ran a framework agent (harness/agents/frameworks/, a scripted model, a real framework) "
             "through the fault proxy against the catalogue's destinations, judged from its audit log, the "
             "journal and the ledger (docs/frameworks.md). Where the agent's log says which layer of its framework "
             "made a retry, the cell says it (\"the 2nd run again by crewAI's ToolUsage\").", "",
             f"{len(result)} cells; {sum(framework_difference(a, c, cell) is None for a, c, cell in result)} "
             "as expected (certification/expected.yaml).", "",
             *framework_table(columns, list(rows.values())), ""]
    return lines + every_cell_table(result)


def said_differences(cells: int, differences: Sequence[str], compared_with: str = "as expected") -> int:
    """The end of a run's output: each cell that differs from expected.yaml, the count, and the exit status (1 when
    any differs)."""
    for line in differences:
        print(f"  differs from {EXPECTED_FILE.name}: {line}")
    print(f"{cells - len(differences)} {compared_with}, {len(differences)} differ")
    return 1 if differences else 0


def every_cell_table(result: Sequence[tuple[Any, Any, Any]]) -> list[str]:
    """An agent section's table of every cell: each (agent, column, cell) with its verdict, effects, attempts, key."""
    from harness.report import markdown_cell

    lines = ["| agent | scenario | verdict | effects | attempts | key behaviour |", "|---|---|---|---|---|---|"]
    for a, c, cell in result:
        got = observed(cell)
        verdict = "PASS" if got.verdict == "pass" else " ".join(["FAIL", *got.codes])
        lines.append("| " + " | ".join(markdown_cell(v) for v in
                                       (a.name, c.scenario, verdict, str(got.effects), str(got.attempts), got.key))
                     + " |")
    return lines


def frameworks_json(result: Sequence[tuple[FrameworkAgent, Column, Any]]) -> list[dict[str, Any]]:
    """matrix.json's ``frameworks``: every framework cell with what the run showed."""
    return agent_cells_json(result, "framework", lambda a: a.framework_version, framework_difference)


def agent_cells_json(result: Sequence[tuple[Any, Any, Any]], release_field: str, release: Callable[[Any], str],
                     difference: Callable[[Any, Any, Any], str | None]) -> list[dict[str, Any]]:
    """The cells of agent rows (a framework's, a durable engine's) as matrix.json keeps them: each with what the run
    showed; ``release_field`` names the release of what the row runs on (``release(agent)``)."""
    out = []
    for a, c, cell in result:
        got = observed(cell)
        out.append({"agent": a.name, release_field: release(a), "setting": a.setting, "command": a.command,
                    "scenario": c.scenario, "column": c.name, "verdict": got.verdict, "codes": list(got.codes),
                    "effects": got.effects, "attempts": got.attempts, "key": got.key,
                    **({"retried_by": list(got.retried_by)} if got.retried_by else {}),
                    "as_expected": difference(a, c, cell) is None, "error": cell.error})
    return out
