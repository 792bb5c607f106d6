"""The durable-engine rows of the certification matrix (certification/durable.py): each agent whose write is a task
of a real engine (harness/agents/durable/), run through the real engine, fault proxy and destination while the
engine's own machinery reruns the work, judged by the full checker; each cell must equal certification/expected.yaml,
and docs/durable.md's table must be that file's. The Celery cells start Debian's redis-server (.ci/run installs it)
and one worker each: about 12 s a cell here; a DBOS cell launches DBOS on a SQLite file (twice when its executor is
killed): about 6 s; a Temporal cell starts the wheel's test server: 5 to 10 s.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from certification.durable import (
    DOCS_FILE,
    TABLE_BEGIN,
    TABLE_END,
    durable_difference,
    load_durable,
    readme_table,
    run_durable_cell,
)
from certification.matrix import EXPECTED_FILE, JSON_FILE
from harness.scenario import load

COLUMNS, AGENTS = load_durable()
CELLS = [(agent, column) for agent in AGENTS for column in COLUMNS if column in AGENTS[agent].cells]


def test_every_row_has_a_safe_setting_and_every_column_a_scenario_that_loads() -> None:
    assert CELLS, "expected.yaml has durable rows"
    for agent in AGENTS.values():
        assert agent.passes_with is None or agent.passes_with in AGENTS, agent.name
        safe = AGENTS[agent.passes_with] if agent.passes_with else agent
        assert all(cell.verdict == "pass" for cell in safe.cells.values()), f"{safe.name} is no safe setting"
    for column in COLUMNS.values():
        assert load(column.path).faults, column.scenario


def test_docs_durable_shows_the_expected_table() -> None:
    text = DOCS_FILE.read_text(encoding="utf-8")
    shown = text[text.index(TABLE_BEGIN):text.index(TABLE_END) + len(TABLE_END)]
    assert shown == readme_table(COLUMNS, AGENTS), "run: python -m certification.durable --readme"


def test_the_published_durable_cells_are_the_expected_ones() -> None:
    """matrix.json's ``durable`` (`python -m certification.durable` writes it) holds every expected cell."""
    published = {(c["agent"], c["column"]): c for c in json.loads(JSON_FILE.read_text(encoding="utf-8"))["durable"]}
    assert set(published) == set(CELLS), "run: python -m certification.durable"
    for (agent, column), cell in published.items():
        want = AGENTS[agent].cells[column]
        assert (cell["verdict"], tuple(cell["codes"]), cell["effects"], cell["attempts"], cell["key"]) == \
            (want.verdict, want.codes, want.effects, want.attempts, want.key) and cell["as_expected"], (agent, column)


def test_a_malformed_row_is_an_error_naming_it(tmp_path: Path) -> None:
    data = yaml.safe_load(EXPECTED_FILE.read_text(encoding="utf-8"))
    data["durable"]["agents"]["celery_default"]["engine"] = "cron"
    broken = tmp_path / "expected.yaml"
    broken.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"durable\.agents\.celery_default: KeyError .*engine 'cron'"):
        load_durable(broken)


@pytest.mark.parametrize(("agent", "column"), CELLS)
def test_durable_cell(agent: str, column: str, tmp_path: Path) -> None:
    """Without redis-server the agent says so and the cell fails naming it (no skip: CI must install it). The DBOS
    cells need only the ``durable`` extra: DBOS runs on a SQLite file; the Temporal cells too: the extra's wheel
    is the server."""
    if AGENTS[agent].engine == "celery":
        assert shutil.which("redis-server"), "redis-server not found: .ci/run installs Debian's redis-server"
    cell = run_durable_cell(AGENTS[agent], COLUMNS[column], str(tmp_path))
    assert durable_difference(AGENTS[agent], COLUMNS[column], cell) is None, \
        durable_difference(AGENTS[agent], COLUMNS[column], cell)
