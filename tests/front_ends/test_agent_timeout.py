"""`--agent-timeout` on `run` and the plugin sets the agent's wall-clock limit over the scenario's, and a
long wait says it is waiting (issue 32)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SLEEPS = "import time; time.sleep(60)"


def test_run_stops_the_agent_at_the_limit_given_and_says_it_was_waiting(tmp_path: Path) -> None:
    (tmp_path / "sleeps.py").write_text(SLEEPS)
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--agent", "python sleeps.py",
                          "--agent-timeout", "11", "--evidence-dir", "ev"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the agent did not finish within 11 s (it was stopped" in run.stdout, run.stdout
    assert "the agent is still running (10 s of its 11 s limit" in run.stderr, run.stderr


def test_the_plugin_takes_the_limit_and_refuses_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "sleeps.py").write_text(SLEEPS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                          "--agent", "python sleeps.py", "--agent-timeout", "2"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "the agent did not finish within 2 s" in run.stdout, run.stdout
    bad = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                          "--agent-timeout", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 4 and "--agent-timeout: the agent's time limit must be a number of seconds above 0" \
        in bad.stderr, bad.stdout + bad.stderr
