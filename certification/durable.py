"""The durable-execution and task-queue rows of the certification matrix: agents whose writes run on an engine
(harness/agents/durable/: Celery on a real redis-server...), each in its default, its common wrong and its safe
setting, against scenarios whose fault the engine's own rerun machinery answers (``scenarios/durable/``: a worker
killed after the commit...). Judged by the full checker from the agent's audit log, the journal and the ledger;
``expected.yaml``'s ``durable:`` says what each cell is, and docs/durable.md shows that table.

``python -m certification.durable`` runs them, compares every cell with ``expected.yaml`` and rewrites the
durable sections of MATRIX.md and matrix.json (and, with ``--readme``, docs/durable.md's table); ``python -m
certification`` runs them with the rest. ``tests/certification/test_durable_matrix.py`` asserts the cells in CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import yaml

from certification.matrix import (
    CELL_AGENT_TIMEOUT,
    EXPECTED_FILE,
    JSON_FILE,
    MARKDOWN_FILE,
    ROOT,
    SCENARIOS_DIR,
    CellOutcome,
    agent_cells_json,
    every_cell_table,
    observed,
    said_differences,
)

DOCS_FILE = ROOT.parent / "docs" / "durable.md"
# the engine's package, whose release a row names
ENGINE_PACKAGES = {"celery": "celery", "dbos": "dbos", "temporal": "temporalio"}
TABLE_BEGIN = ("<!-- durable-matrix: written by `python -m certification.durable --readme` from "
               "certification/expected.yaml -->")
TABLE_END = "<!-- /durable-matrix -->"
MATRIX_BEGIN = "<!-- durable-rows: written by `python -m certification.durable` -->"
MATRIX_END = "<!-- /durable-rows -->"


@dataclass(frozen=True)
class DurableColumn:
    """A column: a scenario file under scenarios/ and its header."""

    name: str
    scenario: str
    header: str

    @property
    def path(self) -> Path:
        return SCENARIOS_DIR / self.scenario


@dataclass(frozen=True)
class DurableAgent:
    """One row: the agent's command, its engine, the setting in a few words, the safe row this one is the
    default or the wrong twin of, and its expected cells (column name -> outcome)."""

    name: str
    engine: str
    command: str
    setting: str
    cells: dict[str, CellOutcome]
    passes_with: str | None = None

    @property
    def engine_version(self) -> str:
        try:
            return f"{self.engine} {version(ENGINE_PACKAGES[self.engine])}"
        except PackageNotFoundError:
            return f"{self.engine} (not installed: pip install -e '.[durable]')"

    @property
    def run_command(self) -> str:
        """What runs: this interpreter (the engines are the ``durable`` extra's), from any folder."""
        return self.command.replace("python ", f"{sys.executable} ", 1)


def load_durable(path: Path = EXPECTED_FILE) -> tuple[dict[str, DurableColumn], dict[str, DurableAgent]]:
    """``expected.yaml``'s ``durable``: its columns and its agents; a malformed entry is a ValueError naming it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")).get("durable") or {}
    columns: dict[str, DurableColumn] = {}
    agents: dict[str, DurableAgent] = {}
    try:
        for name, spec in (data.get("columns") or {}).items():
            columns[name] = DurableColumn(name, spec["scenario"], spec["header"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: durable.columns: {type(exc).__name__} {exc}") from None
    for name, spec in (data.get("agents") or {}).items():
        try:
            cells = {column: CellOutcome.from_dict(cell) for column, cell in spec["cells"].items()}
            unknown = sorted(set(cells) - set(columns))
            if unknown or spec["engine"] not in ENGINE_PACKAGES:
                raise KeyError(f"columns {unknown}" if unknown else f"engine {spec['engine']!r}")
            agents[name] = DurableAgent(name, spec["engine"], spec["command"], spec["setting"], cells,
                                        spec.get("passes_with"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: durable.agents.{name}: {type(exc).__name__} {exc}") from None
    return columns, agents


def run_durable_cell(agent: DurableAgent, column: DurableColumn, evidence_root: str) -> Any:
    """Run one cell through the real engine, judged from the agent's audit log, the wire and the ledger."""
    from harness.matrix import AgentSpec, run_cell

    return run_cell(AgentSpec(agent.name, agent.run_command, bundled=False), str(column.path), evidence_root,
                    agent_timeout=CELL_AGENT_TIMEOUT)


def durable_difference(agent: DurableAgent, column: DurableColumn, cell: Any) -> str | None:
    """Why a run's cell is not its expected one (None when it is)."""
    if cell.error:
        return f"{agent.name} on {column.scenario}: the cell did not run: {cell.error}"
    got, want = observed(cell), agent.cells[column.name]
    if got == want:
        return None
    return (f"{agent.name} on {column.scenario}: expected {want.said()}; got {got.said()} "
            f"(evidence: {cell.evidence or 'not kept'})")


def run_durable(agents: Sequence[DurableAgent], columns: dict[str, DurableColumn], evidence_root: Path
                ) -> list[tuple[DurableAgent, DurableColumn, Any]]:
    """Every cell of ``agents``, one after the other (each starts its own broker and worker)."""
    return [(a, c, run_durable_cell(a, c, str(evidence_root))) for a in agents for c in columns.values()
            if c.name in a.cells]


def durable_table(columns: dict[str, DurableColumn], rows: Sequence[tuple[DurableAgent, dict[str, CellOutcome]]],
                  *, versioned: bool = False) -> list[str]:
    """One row per agent, one column per scenario; ``versioned``: each engine with the release that ran it."""
    from harness.report import markdown_cell

    lines = ["| agent (engine): setting | " + " | ".join(markdown_cell(c.header) for c in columns.values()) + " |",
             "|---" * (1 + len(columns)) + "|"]
    for agent, cells in rows:
        engine = agent.engine_version if versioned else agent.engine
        head = f"`{agent.name}` {markdown_cell(f'({engine}): {agent.setting}')}"
        lines.append("| " + " | ".join([head, *(markdown_cell(cells[c].said()) if c in cells else "-"
                                                 for c in columns)]) + " |")
    return lines


def readme_table(columns: dict[str, DurableColumn], agents: dict[str, DurableAgent]) -> str:
    """docs/durable.md's table between its markers: the expected cells, and each row's command."""
    lines = [TABLE_BEGIN, "", *durable_table(columns, [(a, a.cells) for a in agents.values()]), ""]
    lines += [f"- `{a.name}`: `{a.command}`" + (f" (the safe setting: `{a.passes_with}`)" if a.passes_with else "")
              for a in agents.values()]
    return "\n".join([*lines, "", TABLE_END])


def replace_between(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with what lies between ``begin`` and ``end`` (both included) replaced by ``block``, or ``block``
    appended when the markers are absent."""
    if begin in text and end in text:
        return text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def matrix_section(columns: dict[str, DurableColumn], result: Sequence[tuple[DurableAgent, DurableColumn, Any]]
                   ) -> str:
    """MATRIX.md's durable section: the run's table, then every cell."""
    rows: dict[str, tuple[DurableAgent, dict[str, CellOutcome]]] = {}
    for a, c, cell in result:
        rows.setdefault(a.name, (a, {}))[1][c.name] = observed(cell)
    lines = [MATRIX_BEGIN, "", "# Durable engines and queues", "",
             "Each cell ran an agent whose write is a task or step of a real engine (harness/agents/durable/) through "
             "the fault proxy, the engine's own machinery rerunning the work, judged from its audit log, the journal "
             "and the ledger (docs/durable.md).", "",
             f"{len(result)} cells; {sum(durable_difference(a, c, cell) is None for a, c, cell in result)} as "
             "expected (certification/expected.yaml).", "",
             *durable_table(columns, list(rows.values()), versioned=True), "", *every_cell_table(result)]
    return "\n".join([*lines, "", MATRIX_END])


def durable_json(result: Sequence[tuple[DurableAgent, DurableColumn, Any]]) -> list[dict[str, Any]]:
    """matrix.json's ``durable``: every cell with what the run showed."""
    return agent_cells_json(result, "engine", lambda a: a.engine_version, durable_difference)


def publish(columns: dict[str, DurableColumn], result: Sequence[tuple[DurableAgent, DurableColumn, Any]],
            markdown_path: Path = MARKDOWN_FILE, json_path: Path = JSON_FILE) -> None:
    """Rewrite the durable sections of MATRIX.md and matrix.json, the rest of each file left as it is."""
    text = markdown_path.read_text(encoding="utf-8") if markdown_path.is_file() else ""
    markdown_path.write_text(replace_between(text, MATRIX_BEGIN, MATRIX_END, matrix_section(columns, result)),
                             encoding="utf-8")
    published = json.loads(json_path.read_text(encoding="utf-8")) if json_path.is_file() else {}
    published["durable"] = durable_json(result)
    json_path.write_text(json.dumps(published, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m certification.durable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", action="append", metavar="NAME", help="only this row (repeatable)")
    parser.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                        help="where failed cells keep their evidence (default ./evidence)")
    parser.add_argument("--readme", action="store_true", help="also rewrite docs/durable.md's table")
    args = parser.parse_args(argv)
    columns, agents = load_durable()
    unknown = sorted(set(args.agent or ()) - set(agents))
    if unknown:
        parser.error(f"unknown agent(s) {', '.join(unknown)}; valid: {', '.join(agents)}")
    chosen = [a for name, a in agents.items() if not args.agent or name in args.agent]
    started = time.perf_counter()
    result = run_durable(chosen, columns, args.evidence_dir)
    publish(columns, result)
    if args.readme:
        DOCS_FILE.write_text(replace_between(DOCS_FILE.read_text(encoding="utf-8"), TABLE_BEGIN, TABLE_END,
                                             readme_table(columns, agents)), encoding="utf-8")
    differences = [d for a, c, cell in result if (d := durable_difference(a, c, cell)) is not None]
    print(f"{len(result)} cells in {time.perf_counter() - started:.1f} s; wrote {MARKDOWN_FILE} and {JSON_FILE}")
    return said_differences(len(result), differences)


if __name__ == "__main__":
    sys.exit(main())
