"""`python -m harness agents` lists every bundled agent with its flaw and the command that runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import harness.agents.wrong


def test_every_wrong_agent_is_listed_with_the_command_that_runs_it() -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "agents"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modules = sorted(p.stem for p in Path(harness.agents.wrong.__file__).parent.glob("*.py") if p.stem != "__init__")
    listed = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert listed["reference"].endswith('--agent "python -m harness.agents.reference"')
    missing = [m for m in modules if m not in listed]
    assert not missing, f"wrong agents not listed (expected_outcomes.yaml lacks them?): {missing}"
    for name in modules:
        assert f'--agent "python -m harness.agents.wrong.{name}"' in listed[name], listed[name]
