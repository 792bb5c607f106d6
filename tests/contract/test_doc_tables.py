"""The documentation's tables are the registries' (harness.doc_tables): the catalogue from each scenario's
summary, the rules from the rule registry, the fault actions from the proxy's; a page that says otherwise
fails here, naming the block and the command that rewrites it."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import doc_tables
from harness.resources import catalogue_dir


def test_every_generated_block_is_the_registrys() -> None:
    assert doc_tables.stale() == {}, "run: python -m harness.doc_tables --write"


def test_the_catalogue_table_has_a_row_per_bundled_scenario() -> None:
    rows = [line for line in doc_tables.catalogue_table().splitlines()[2:]]
    assert [row.split("`")[1] for row in rows] == sorted(p.stem for p in catalogue_dir().glob("*.yaml"))
    assert all(row.count("|") == 4 and " |  |" not in row for row in rows), rows  # both phrases, every row


def test_a_page_that_drifts_is_named_and_rewritten(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(doc_tables.DOCS, docs)
    page = docs / "scenarios.md"
    page.write_text(page.read_text().replace("| `response_lost` |", "| `response_lost_renamed` |"))
    assert set(doc_tables.stale(docs)) == {"catalogue"}
    assert doc_tables.write(docs) == ["scenarios.md"]
    assert doc_tables.stale(docs) == {}
