"""The framework agents in the certification matrix: each agent (harness/agents/frameworks/, correct and with
its framework's common wrong retry setting) on each column's scenario, through the real engine and fault
proxy, judged by the full checker from its audit log; each cell must equal certification/expected.yaml, and
the README's framework table must be that file's. 146 cells, about 12 minutes with `-n 2` (each a framework agent
process: its imports are most of it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from certification.matrix import (
    EXPECTED_FILE,
    FRAMEWORK_PACKAGES,
    README_FILE,
    framework_difference,
    framework_readme_table,
    load_frameworks,
    run_framework_cell,
)
from harness.scenario import load

COLUMNS, AGENTS = load_frameworks()
CELLS = [(agent, column) for agent in AGENTS for column in COLUMNS if column in AGENTS[agent].cells]


def test_each_frameworks_cells_run_beside_the_harness_in_an_environment_of_its_certified_releases() -> None:
    """The framework table names the releases it was measured with, expected.yaml's frameworks.certified, and each
    framework's agents run in an environment holding those releases, the harness's dependencies and its sources,
    resolved together (so a release that cannot be installed beside the harness fails here), without mitmproxy."""
    from certification.environments import harness_environment

    imports = {"langgraph": "langgraph.graph", "openai-agents": "agents.mcp", "pydantic-ai": "pydantic_ai.mcp",
               "smolagents": "smolagents", "agno": "agno.agent", "crewai": "crewai",
               "langchain-mcp-adapters": "langchain_mcp_adapters.client, langgraph.prebuilt"}
    assert set(imports) == set(FRAMEWORK_PACKAGES)
    checked: set[str] = set()
    for agent in AGENTS.values():
        assert agent.certified, f"{agent.name}: no certified releases"
        made = harness_environment(agent.certified)
        assert agent.run_command.startswith(f"{made.python} -m harness.agents.frameworks."), agent.run_command
        for pin in agent.certified:
            package, release = pin.split("==", 1)
            assert made.version(package) == release, (agent.name, pin, made.version(package))
        assert agent.framework_version.split()[-1] == made.version(FRAMEWORK_PACKAGES[agent.framework])
        assert "mitmproxy" not in made.versions
        if agent.framework in checked:
            continue
        checked.add(agent.framework)
        imported = subprocess.run([str(made.python), "-c", "import harness.instrument, harness.agents.frameworks.tools,"
                                   f" mcp, {imports[agent.framework]}; print(harness.__file__)"],
                                  capture_output=True, text=True, timeout=120)
        assert imported.returncode == 0, imported.stderr[-2000:]
        assert imported.stdout.strip() == str(Path(__file__).resolve().parents[2] / "harness" / "__init__.py")


def test_an_agent_at_another_release_swaps_its_frameworks_pin_and_keeps_the_others() -> None:
    agent = AGENTS["pydantic_ai_safe"].at("2.70.0")
    assert agent.certified[0] == "pydantic-ai-slim==2.70.0" and agent.framework_version == "pydantic-ai 2.70.0"
    assert set(agent.certified[1:]) == set(AGENTS["pydantic_ai_safe"].certified) - {"pydantic-ai-slim==2.68.0"}
    assert agent.cells == AGENTS["pydantic_ai_safe"].cells  # judged against the published cells


def test_a_framework_release_runs_its_agents_there_and_leaves_expected_yaml_and_the_published_files(
        tmp_path: Path) -> None:
    """`--framework NAME==VERSION` (here with an agent's name: one cell) makes an environment for that release and
    compares its cells with the published ones; expected.yaml is neither needed edited nor touched."""
    published = {path: path.read_bytes() for path in (EXPECTED_FILE, EXPECTED_FILE.parent / "MATRIX.md",
                                                      EXPECTED_FILE.parent / "matrix.json")}
    done = subprocess.run([sys.executable, "-m", "certification", "--framework", "agno==3.1.9", "--framework",
                           "agno_run_retries_safe", "--evidence-dir", str(tmp_path)],
                          cwd=EXPECTED_FILE.parents[1], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [row] = [line for line in done.stdout.splitlines() if line.startswith("| `agno_")]
    assert row.startswith("| `agno_run_retries_safe` (agno 3.1.9): ") and "PASS: 1 effect, 1 attempt" in row, row
    assert "1 as published, 0 differ" in done.stdout, done.stdout
    assert {path: path.read_bytes() for path in published} == published


def test_expected_framework_cells_name_real_agents_scenarios_and_rules() -> None:
    from harness.checker import RULES
    from harness.results import EXPECTATION_CODE

    codes = set(RULES) | {EXPECTATION_CODE}
    for column in COLUMNS.values():
        assert load(column.path).agent_log != "none", f"{column.scenario}: these agents are judged from their log"
    # a framework's own fault, raised by the row's scripted model: only the rows run with that flag have its cell
    model = {c for c, column in COLUMNS.items() if column.raised_by == "model"}
    network = set(COLUMNS) - model
    assert model and {column.raised_by for column in COLUMNS.values()} == {"proxy", "model"}
    for agent in AGENTS.values():
        module = agent.command.split()[2]
        assert (Path(__file__).resolve().parents[2] / (module.replace(".", "/") + ".py")).is_file(), agent.name
        if "--model-error-after-tool" in agent.command.split():
            assert agent.adapter is None and agent.agent_log == "events", agent.name
            assert set(agent.cells) == model, agent.name
        elif agent.adapter is not None:  # the framework's own MCP adapter: the MCP tool servers' columns only
            assert agent.agent_log == "events", agent.name
            assert set(agent.cells) == {c for c in network if c.startswith("mcp_")}, agent.name
        elif agent.agent_log == "events":
            assert set(agent.cells) == network, f"{agent.name}: one cell per network fault's column"
        else:  # the trace-only agent's tool records HTTP calls as spans; its MCP calls are not traced
            assert set(agent.cells) == {c for c in network if not c.startswith("mcp_")}, agent.name
        for column, cell in agent.cells.items():
            assert (cell.verdict == "fail") == bool(cell.codes), f"{agent.name} {column}: a fail names its codes"
            assert set(cell.codes) <= codes, f"{agent.name} {column}: unknown codes {set(cell.codes) - codes}"
        if agent.passes_with is not None:
            safe = AGENTS[agent.passes_with]
            assert safe.framework == agent.framework and safe.passes_with is None, agent.name
            assert all(c.verdict == "pass" for c in safe.cells.values()), f"{safe.name} must pass every column"
            # a blind retry after an unknown outcome is caught by the rules that name it, wherever one happens; a
            # rerun after a success (the model's fault) by the ones that name a retry with no reason and two effects
            for column, cell in agent.cells.items():
                blind = {"H008", "H016"} if column in model else {"H010", "H016"}
                if cell.effects > 1:
                    assert blind <= set(cell.codes), f"{agent.name} {column}: {cell.codes}"


def test_the_readme_framework_table_is_the_expected_matrix() -> None:
    assert framework_readme_table(COLUMNS, AGENTS) in README_FILE.read_text(encoding="utf-8"), (
        f"the README's framework table is not {EXPECTED_FILE.name}'s: python -m certification --readme")


@pytest.mark.parametrize("agent, column", CELLS, ids=[f"{a}-{c}" for a, c in CELLS])
def test_framework_cell(agent: str, column: str, tmp_path: Path) -> None:
    cell = run_framework_cell(AGENTS[agent], COLUMNS[column], str(tmp_path))
    problem = framework_difference(AGENTS[agent], COLUMNS[column], cell)
    stdout = Path(cell.evidence, "agent.stdout") if cell.evidence else None
    assert problem is None, problem + (f"\nthe agent printed: {stdout.read_text()}" if stdout and
                                       stdout.is_file() else "")


def test_a_trace_only_row_is_judged_as_its_audit_log_twin() -> None:
    """The same agent, once logging audit events and once only OpenTelemetry spans: the same cells, the same
    rule codes (docs/otel.md: one set of rules, whatever the source)."""
    traced = [a for a in AGENTS.values() if a.agent_log == "otel"]
    assert traced, "at least one framework agent is trace-only"
    for agent in traced:
        twin = next(a for a in AGENTS.values() if a.agent_log == "events"
                    and a.command == agent.command.replace(" --trace", ""))
        assert agent.cells == {c: twin.cells[c] for c in agent.cells}, f"{agent.name} and {twin.name}"
