"""`pytest --scenario ...` in a project with its own API: the catalogue placed on it, through the real plugin,
destinations, proxy and agents (a pytest subprocess each, as a team's CI starts it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.resources import catalogue_dir
from tests.project.test_project import DATA

PROJECT = """
[tool.retry-harness]
mode = "events"

[tool.retry-harness.destinations.helpy]
api = "helpy.yaml"

[[tool.retry-harness.intents]]
intent_id = "printer-fire"
destination = "helpy"
operation = "POST /api/v2/tickets"
params = { summary = "Printer on fire", queue = "OPS", external_id = "inc-1" }
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    shutil.copy(DATA / "helpy.yaml", pytester.path / "helpy.yaml")
    (pytester.path / "pyproject.toml").write_text(PROJECT, encoding="utf-8")
    return pytester.path


def test_a_correct_agent_passes_on_the_projects_api_and_what_does_not_apply_is_said(run_plugin, project) -> None:
    result = run_plugin("--scenario", "response_lost", "--scenario", "response_lost_key_replay", "-v")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*project*pyproject.toml (1 destination(s), 1 intent(s), mode events)*",
        "*retry-harness: not applicable to this project*",
        "response_lost_key_replay: helpy declares a lookup*",
        "*scenario response_lost with agent*PASS*",
        "*not applicable here (helpy declares a lookup (/api/v2/tickets)*response_lost_key_replay*"])
    out = result.stdout.str()
    assert "see response_lost_key_replay" not in out  # hints point only at scenarios that apply


def test_a_wrong_agent_fails_on_the_rule_that_names_its_flaw(run_plugin, project) -> None:
    result = run_plugin("--scenario", "response_lost", "--agent", "python -m harness.agents.wrong.new_key_per_attempt")
    result.assert_outcomes(failed=1)
    assert "H002" in result.stdout.str()


def test_all_is_the_catalogue_and_the_teams_own_files_selected_by_markers(run_plugin, project) -> None:
    own = project / "scenarios"
    own.mkdir()
    shutil.copy(catalogue_dir() / "rate_limited.yaml", own / "rate_limited.yaml")  # shadows the catalogue's
    text = (catalogue_dir() / "response_lost.yaml").read_text().replace("name: response_lost", "name: my_incident")
    (own / "my_incident.yaml").write_text(text)
    result = run_plugin("--scenario", "all", "--collect-only", "-q")
    items = [line for line in result.stdout.lines if "::" in line]
    assert len(items) == len(list(catalogue_dir().glob("*.yaml"))) + 1
    assert any(line.startswith("scenarios/my_incident.yaml") for line in items)
    assert any(line.startswith("scenarios/rate_limited.yaml") for line in items)
    assert not any("harness/scenarios/rate_limited.yaml" in line for line in items)
    result = run_plugin("--scenario", "all", "-m", "ssh", "-q")  # SSH scenarios: none applies to an HTTP API
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*not applicable to this project*",
                                 "ssh_restart_dropped: helpy is reached over http*"])


def test_the_catalogue_command_says_what_applies_to_the_project(project) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness", "scenarios"], cwd=project, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert len(lines) == len(list(catalogue_dir().glob("*.yaml")))
    assert "not applicable here: helpy declares a lookup" in lines["response_lost_key_replay"]
    assert "not applicable" not in lines["response_lost"]
