"""Evidence limits (harness.limits): an agent log beyond its size, its line length or its operation count is
not read, so it cannot exhaust the harness's memory; the run is INCOMPLETE with a sentence that names the file,
the value, the limit and how to raise it, and every file of the evidence stays on disk as it was.

Hand-built folders through `check`, and real runs through `run` and the pytest plugin, as a user starts them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.contract import EvidenceLayout
from harness.errors import ScenarioError
from harness.evidence import load_evidence
from harness.limits import EvidenceLimits
from harness.resources import catalogue_dir
from harness.scenario import Limits, load
from tests.browser.synthetic import build

EXIT_INCOMPLETE = 3


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize(("limit", "value", "where", "over"), [
    ("operations", 3, "agent.ndjson:", "4 operations (distinct operation ids) in the agent's log, over the limit of 3"),
    ("line_bytes", 100, "agent.ndjson:1: ", "bytes in one line of the agent's log, over the limit of 100"),
    ("agent_log_bytes", 2000, "agent.ndjson: ", "bytes in the agent's log, over the limit of 2,000"),
])
def test_check_of_a_log_beyond_a_limit_is_incomplete_names_it_and_keeps_the_evidence(
        tmp_path: Path, limit: str, value: int, where: str, over: str) -> None:
    folder = build(tmp_path / "ev", 10)
    before = files_of(folder)
    done = harness("check", str(folder), "--limit", f"{limit}={value}")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert done.stdout.startswith("INCOMPLETE: the harness lost evidence, so the agent was not judged:")
    assert where in done.stdout and over in done.stdout and f"({limit})" in done.stdout
    assert f"--limit {limit}=N" in done.stdout and f"limits: {{{limit}: N}}" in done.stdout
    assert f"--harness-limit {limit}=N" in done.stdout
    assert "FAIL" not in done.stdout  # nothing of it judged
    as_json = json.loads(harness("check", str(folder), "--limit", f"{limit}={value}", "--format", "json").stdout)
    assert as_json["outcome"] == "incomplete" and over in as_json["incomplete"][0]
    assert files_of(folder) == before  # the evidence stays on disk as it was
    raised = harness("check", str(folder), "--limit", f"{limit}={value * 1000}")
    assert raised.returncode == 1 and "verdict: FAILED (10 operation(s)" in raised.stdout  # judged once raised


def test_the_operation_limit_names_the_line_and_the_operation_past_it(tmp_path: Path) -> None:
    folder = build(tmp_path / "ev", 10)
    evidence = load_evidence(folder, limits={"operations": 3})
    [gap] = evidence.incomplete
    first_of_fourth = next(n for n, line in enumerate((folder / "agent.ndjson").read_text().splitlines(), 1)
                           if '"op_000003"' in line)
    assert gap.startswith(f"agent log: agent.ndjson:{first_of_fourth} (operation op_000003): 4 operations")
    assert evidence.events == [] and evidence.raw_log == []  # nothing kept in memory, nothing judged


def test_the_defaults_read_every_log_of_a_scenario_and_a_folder_keeps_its_own_limits(tmp_path: Path) -> None:
    folder = build(tmp_path / "ev", 10)
    assert load_evidence(folder).incomplete == []
    context = json.loads((folder / "context.json").read_text())
    context["limits"] = {"operations": 2}
    (folder / "context.json").write_text(json.dumps(context))
    assert "over the limit of 2 (operations)" in load_evidence(folder).incomplete[0]
    assert load_evidence(folder, limits={"operations": 20}).incomplete == []  # --limit over the folder's


def test_a_bad_limit_is_refused_where_it_is_given(tmp_path: Path) -> None:
    for value in ({"operations": 0}, {"lines": 5}, {"line_bytes": "big"}):
        path = tmp_path / "bad.yaml"
        data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
        path.write_text(yaml.safe_dump({**data, "limits": value}))
        with pytest.raises(ScenarioError):
            load(path)
    run = harness("run", "response_lost", "--limit", "operations=-1")
    assert run.returncode == 2 and "limit operations must be a whole number of at least 1" in run.stderr
    with pytest.raises(ValueError, match="unknown limit"):
        EvidenceLimits().with_values([("nope", 1)])


def test_the_scenario_schema_states_the_defaults() -> None:
    defaults = EvidenceLimits()
    for name, field in Limits.model_fields.items():
        assert f"default {getattr(defaults, name)}" in (field.description or ""), name


def run_variant(tmp_path: Path, *extra: str, **changes: object) -> tuple[subprocess.CompletedProcess[str], Path]:
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data.update(name="limited", **changes)
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(data))
    run = harness("run", str(path), "--evidence-dir", str(tmp_path / "ev"), "--format", "json",
                  "--keep-evidence", "failed", *extra)
    return run, Path(json.loads(run.stdout.splitlines()[-1])["evidence"])


def test_a_run_over_its_scenarios_line_limit_is_incomplete_and_check_judges_it_once_raised(tmp_path: Path) -> None:
    run, folder = run_variant(tmp_path, limits={"line_bytes": 60})
    assert run.returncode == EXIT_INCOMPLETE, run.stdout + run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["incomplete"][0].startswith("agent log: agent.ndjson:1: ")
    layout = EvidenceLayout(folder)
    assert layout.agent_log.stat().st_size > 0 and layout.journal.exists() and layout.ledger_dump.exists()
    assert json.loads(layout.context.read_text())["limits"] == {**EvidenceLimits().to_dict(), "line_bytes": 60}
    text = layout.verdict_text.read_text()
    assert "INCOMPLETE" in text and "over the limit of 60 (line_bytes)" in text
    again = harness("check", str(folder))
    assert again.returncode == EXIT_INCOMPLETE and "(line_bytes)" in again.stdout
    raised = harness("check", str(folder), "--limit", "line_bytes=1000000")
    assert raised.returncode == 0, raised.stdout + raised.stderr  # the reference agent, judged whole


def test_run_limit_overrides_the_scenario(tmp_path: Path) -> None:
    run, folder = run_variant(tmp_path, "--limit", "operations=1", limits={"line_bytes": 60})
    assert run.returncode == EXIT_INCOMPLETE
    limits = json.loads(EvidenceLayout(folder).context.read_text())["limits"]
    assert (limits["operations"], limits["line_bytes"]) == (1, 60)


def test_the_pytest_plugin_takes_harness_limit(run_plugin) -> None:
    result = run_plugin("--scenario", "response_lost", "--harness-limit", "agent_log_bytes=100")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*: INCOMPLETE", "*", "INCOMPLETE: the harness lost evidence*",
                                 "  - agent log: agent.ndjson: *over the limit of 100 (agent_log_bytes)*"])
    [verdict] = [json.loads(p.read_text()) for p in result.evidence_dir.rglob("verdict.json")]
    assert verdict["passed"] is False and verdict["incomplete"]
    assert (Path(verdict["evidence_dir"]) / "agent.ndjson").stat().st_size > 100
    bad = run_plugin("--scenario", "response_lost", "--harness-limit", "operations=none")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--harness-limit: limit operations: expected a whole number, got 'none'*"])
