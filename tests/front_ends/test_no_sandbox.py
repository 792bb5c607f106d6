"""Unsandboxed on request in the plugin as in `run --no-sandbox`: `--no-sandbox` (`--harness-no-sandbox`), as
`HARNESS_SANDBOX=off`; the verdict says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.contract import SANDBOX_ENV


def test_the_plugin_runs_the_agent_unsandboxed_on_request(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != SANDBOX_ENV}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                           "--no-sandbox", "--evidence-dir", "ev"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    [verdict] = (tmp_path / "ev").glob("*/verdict.json")
    assert json.loads(verdict.read_text())["sandbox"].startswith("unsandboxed: turned off"), verdict.read_text()
