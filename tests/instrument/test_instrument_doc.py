"""docs/instrument.md and the README's snippet, held to the code: the snippet runs as written, the public
names are documented, and the documented failures of the example agents are the end-to-end test's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

import harness.instrument
from harness.instrument import instrument
from tests.instrument.loopback import Reply, events, harness_env, serving
from tests.instrument.test_end_to_end import FAILS

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "instrument.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
AGENTS_DOC = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")  # the README's section, moved


def test_the_readme_links_the_doc_and_its_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "(docs/instrument.md)" in README
    section = AGENTS_DOC.split("## Instrumenting an existing Python agent", 1)[1].split("\n## ", 1)[0]
    [snippet] = re.findall(r"```python\n(.*?)```", section, re.S)
    with serving([Reply(201, {"id": "tkt_0001"})]) as server:
        for name, value in harness_env(tmp_path, server.url).items():
            monkeypatch.setenv(name, value)
        exec(snippet, {"instrument": instrument, "requests": requests, "url": server.url + "/tickets"})  # noqa: S102
    assert [(e["event"], e.get("state")) for e in events(tmp_path)] == \
        [("operation", "open"), ("attempt", None), ("resolution", "succeeded")]


def test_every_public_name_is_documented() -> None:
    for name in harness.instrument.__all__:
        if not name.endswith("Record"):
            assert name in DOC, name
    for name in ("todo", "observe", "resolve", "next_retry", "effect_ref", "last_attempt", "retry_after", "done"):
        assert f"`{name}" in DOC, name


def test_the_documented_failures_are_the_end_to_end_tests() -> None:
    table = DOC.split("## The example agents on the catalogue", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): line for line in table.splitlines() if (m := re.match(r"\| `(\w+)`", line))}
    for (agent, scenario), codes in FAILS.items():
        failures = rows[agent].rsplit("|", 2)[1]  # the row's last cell: what it fails, scenario by scenario
        told = re.search(rf"`{scenario}`([^`]*)", failures)
        assert told, (agent, scenario)
        assert set(re.findall(r"[HX]\d{3}", told.group(1))) == codes, (agent, scenario, told.group(1))
