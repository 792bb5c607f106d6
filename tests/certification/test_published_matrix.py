"""The published tables are a run's, and that run is the expected matrix at the certified releases: every cell of
certification/expected.yaml is in matrix.json (which `python -m certification` writes beside MATRIX.md), with the
outcome expected.yaml gives, the release its `certified:` names, and nothing else. A hand edit of either file,
or an expected.yaml changed without a new run, fails here."""

from __future__ import annotations

import json

from certification.matrix import (
    FAULTS,
    JSON_FILE,
    MARKDOWN_FILE,
    CellOutcome,
    load_expected,
    load_frameworks,
)


def outcome(cell: dict) -> CellOutcome:
    return CellOutcome.from_dict(cell)


def test_the_published_sdk_cells_are_the_expected_ones_at_the_certified_releases() -> None:
    published = json.loads(JSON_FILE.read_text(encoding="utf-8"))
    connectors = load_expected()
    cells = {(c["connector"], c["fault"]): c for c in published["cells"]}
    assert set(cells) == {(name, fault) for name in connectors for fault in FAULTS}
    for (name, fault), cell in cells.items():
        connector = connectors[name]
        assert cell["as_expected"] and cell["error"] is None, (name, fault)
        assert outcome(cell) == connector.cells[fault], (name, fault, cell)
        assert cell["sdk"] == connector.sdk_version, (name, cell["sdk"], connector.sdk_version)
    markdown = MARKDOWN_FILE.read_text(encoding="utf-8")
    assert markdown.startswith("<!-- written by `python -m certification`")
    assert all(f"`{name}` ({connector.sdk_version})" in markdown for name, connector in connectors.items())


def test_the_published_framework_cells_are_the_expected_ones_at_the_certified_releases() -> None:
    published = json.loads(JSON_FILE.read_text(encoding="utf-8"))
    columns, agents = load_frameworks()
    cells = {(c["agent"], c["column"]): c for c in published["frameworks"]}
    assert set(cells) == {(name, column) for name, agent in agents.items() for column in agent.cells}
    for (name, column), cell in cells.items():
        agent = agents[name]
        assert cell["as_expected"] and cell["error"] is None, (name, column)
        assert outcome(cell) == agent.cells[column], (name, column, cell)
        pins = dict(pin.split("==", 1) for pin in agent.certified)
        assert cell["framework"].split()[-1] in pins.values(), (name, cell["framework"], agent.certified)
