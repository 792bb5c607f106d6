"""docs/first-agent.md holds what its agent does: the agent written on the page is run on every HTTP scenario of
the catalogue and each verdict must be the page's table's, and the mistake the page makes (a timeout called a
failure) must be caught by the rule the page names."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalogue import markers
from harness.resources import catalogue_dir
from harness.scenario import load
from tests.docs.test_command_blocks import blocks, declared_files

PAGE = Path(__file__).resolve().parents[2] / "docs" / "first-agent.md"


def table() -> dict[str, str]:
    """scenario -> PASS or FAIL, as the page's table says."""
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (PASS|FAIL) \|", PAGE.read_text(encoding="utf-8"), flags=re.M)
    return dict(rows)


def http_scenarios() -> set[str]:
    """What the page's `-m http` selects: the scenarios marked http (harness.catalogue.markers), none of them
    on SSH or MCP."""
    scenarios = [load(path) for path in catalogue_dir().glob("*.yaml")]
    assert {s.name for s in scenarios if "http" in markers(s)} == {
        s.name for s in scenarios if all(d.service not in ("ssh", "mcp") for d in s.destinations.values())}
    return {s.name for s in scenarios if "http" in markers(s)}


def run(folder: Path, agent: str, *scenarios: str) -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-m", "harness", "run", *scenarios, "--agent", agent, "--format", "json",
                           "--evidence-dir", str(folder / "evidence")], cwd=folder, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {v["scenario"]: v for v in verdicts}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in declared_files(PAGE).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_the_table_lists_every_http_scenario_of_the_catalogue() -> None:
    assert set(table()) == http_scenarios()


def test_the_agents_length_is_the_one_the_page_and_the_readme_give() -> None:
    lines = len(declared_files(PAGE)["first_agent.py"].splitlines())
    for page in (PAGE, PAGE.parents[1] / "README.md"):
        assert f"{lines}-line agent" in page.read_text(encoding="utf-8"), page


def test_the_pages_agent_gets_the_verdict_the_table_gives_on_every_row(folder: Path) -> None:
    expected = table()
    verdicts = run(folder, "python first_agent.py", *expected)
    got = {name: "PASS" if verdicts[name]["passed"] else "FAIL" for name in expected}
    assert got == expected
    passed = sum(v == "PASS" for v in got.values())
    assert f"{passed} of the {len(got)} HTTP scenarios" in PAGE.read_text(encoding="utf-8")


def test_the_pages_mistake_is_caught_by_the_rule_it_names(folder: Path) -> None:
    (mistake, run_it), *_ = [b for b in blocks(PAGE) if b and b[0].startswith("sed ")]
    subprocess.run(["bash", "-c", mistake], cwd=folder, check=True, timeout=60)
    wrong = (folder / "timeout_is_failure.py").read_text()
    assert wrong != (folder / "first_agent.py").read_text(), "the page's sed no longer changes the agent"
    scenario = run_it.split()[4]
    verdict = run(folder, "python timeout_is_failure.py", scenario)[scenario]
    assert not verdict["passed"]
    failed = {check.split()[0] for check, status in verdict["checks"].items() if status == "failed"}
    assert "H006" in failed, verdict["checks"]
