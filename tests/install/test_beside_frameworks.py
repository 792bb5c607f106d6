"""The harness installs where agents live: one fresh venv holds it and langgraph, mcp, openai-agents
and pydantic-ai (whose httpcore needs h11>=0.16, which mitmproxy 11 forbids), and a scenario runs there.

Real pip, real venvs, the real proxy runtime: the harness's venv has no mitmproxy, so the proxy runs
in the private venv it makes on first use (here in the test's own folder, made from scratch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.contract import PROXY_VENV_ENV
from harness.resources import catalogue_dir

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("langgraph", "langchain-core", "mcp", "openai-agents", "pydantic-ai-slim")
IMPORTS = ("langgraph.graph", "langchain_core", "mcp", "agents", "pydantic_ai")
INSTALL_TIMEOUT = 600


def run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]


def test_one_venv_holds_the_harness_and_the_agent_frameworks_and_runs_a_scenario(tmp_path: Path) -> None:
    venv = tmp_path / "agent-venv"
    assert run([sys.executable, "-m", "venv", str(venv)], timeout=120).returncode == 0
    python = str(venv / "bin" / "python")
    install = run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT), *FRAMEWORKS],
                  timeout=INSTALL_TIMEOUT)
    assert install.returncode == 0, install.stderr[-3000:]

    versions = run([python, "-c", "import importlib.metadata as m, importlib.util as u, json; print(json.dumps("
                    "{'h11': m.version('h11'), 'mitmproxy': u.find_spec('mitmproxy') is not None}))"], timeout=60)
    found = json.loads(versions.stdout)
    assert not found["mitmproxy"], "mitmproxy must not be installed into the agent's environment"
    assert tuple(int(x) for x in found["h11"].split(".")[:2]) >= (0, 16), found
    imported = run([python, "-c", "; ".join(f"import {name}" for name in IMPORTS)], timeout=120)
    assert imported.returncode == 0, imported.stderr[-2000:]

    folder = tmp_path / "work"  # an empty folder: nothing of the repo's checkout on the path
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env[PROXY_VENV_ENV] = str(tmp_path / "proxy-runtime")
    scenario = catalogue_dir() / "response_lost.yaml"
    result = run([python, "-m", "harness", "run", str(scenario), "--format", "json"], cwd=folder, env=env,
                 timeout=INSTALL_TIMEOUT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["passed"] is True and Path(summary["evidence"]).is_relative_to(folder)
    assert "making the fault proxy's runtime" in result.stderr  # it was made, not found somewhere else
    assert (tmp_path / "proxy-runtime" / ".complete").exists()
