"""A newcomer's first agent mistakes read as an agent that is broken, with its stderr, not as a wrong agent
whose missing work the rules list (issue 32): a module that is not there, a script that is not there, a crash
before any work, a command that cannot start; and a crash after some work keeps its findings and says why it
stopped. Through the real front ends (harness run, pytest, check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.front_ends.test_incomplete_evidence import harness

CRASHES = 'import sys; sys.stderr.write("starting\\n"); raise RuntimeError("the config file agent.toml is missing")'
WORKS_THEN_CRASHES = """
import json, os
with open(os.environ["HARNESS_AUDIT_LOG"], "a") as log:
    log.write(json.dumps({"event": "operation", "operation_id": "op_1", "intent_id": "printer-on-fire",
                          "ts": "2026-12-03T00:00:00Z", "state": "open"}) + "\\n")
raise SystemExit("lost my way after declaring op_1")
"""


@pytest.mark.parametrize(("agent", "says"), [
    ("python -m mypkg.agent", "No module named 'mypkg'"),
    ("python missing_agent.py", "can't open file"),
    ("python crashes.py", "RuntimeError: the config file agent.toml is missing"),
])
def test_a_broken_agent_reads_as_broken_with_its_stderr(tmp_path: Path, agent: str, says: str) -> None:
    (tmp_path / "crashes.py").write_text(CRASHES)
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--agent", agent,
                          "--evidence-dir", "ev"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "verdict: FAILED (0 operation(s), 1 finding(s)" in run.stdout, run.stdout
    assert "without doing anything (no audit event, no request): it is broken, not judged wrong" in run.stdout
    assert says in run.stdout, run.stdout
    for noise in ("H021", "ledger effects seq None", "ended without an operation", "holds 0 distinct"):
        assert noise not in run.stdout, run.stdout
    folder = Path(run.stdout.split("evidence: ")[-1].strip())
    again = harness("check", str(folder))
    assert again.returncode == 1 and says in again.stdout and "H021" not in again.stdout, again.stdout


def test_the_plugin_says_the_same(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                          "--agent", "python -m mypkg.agent"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout
    assert "it is broken, not judged wrong" in run.stdout and "No module named 'mypkg'" in run.stdout, run.stdout
    assert "H021" not in run.stdout


def test_an_agent_that_cannot_start_leaves_a_folder_that_says_so(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--agent", "no-such-program",
                          "--evidence-dir", "ev"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "cannot start agent 'no-such-program'" in run.stderr, run.stderr
    folder = Path(run.stderr.split("evidence: ")[-1].strip())
    verdict = json.loads((folder / "verdict.json").read_text())
    assert verdict["passed"] is False
    again = harness("check", str(folder))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "the agent could not start: cannot start agent 'no-such-program'" in again.stdout
    assert "H021" not in again.stdout


def test_a_crash_after_some_work_is_judged_and_says_why_it_stopped(tmp_path: Path) -> None:
    (tmp_path / "halfway.py").write_text(WORKS_THEN_CRASHES)
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--agent", "python halfway.py",
                          "--evidence-dir", "ev"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "it is broken" not in run.stdout  # it did work: that work is judged
    assert "the agent exited with status 1 (the contract asks for 0 once its work is done, whatever the " \
           "outcomes); its stderr ends: lost my way after declaring op_1" in run.stdout, run.stdout
