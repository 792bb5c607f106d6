"""docs/first-agent-typescript.md holds what its agent does: the TypeScript agent written on the page, run by the
test extra's Node 24 through the real harness, passes the main scenario, and the mistake the page makes (a timeout
called a failure) is caught by the rule the page names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.common.node import node
from tests.docs.test_command_blocks import blocks, declared_files

PAGE = Path(__file__).resolve().parents[2] / "docs" / "first-agent-typescript.md"


def run(folder: Path, agent: str, scenario: str) -> dict:
    """The page's command, with the test extra's Node first on PATH (`node` in the agent's command is it)."""
    env = {**os.environ, "PATH": f"{Path(node()).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "harness", "run", scenario, "--agent", agent, "--format", "json",
                           "--evidence-dir", str(folder / "evidence")], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    [verdict] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return verdict


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in declared_files(PAGE).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_the_agents_length_is_the_one_the_page_gives() -> None:
    lines = len(declared_files(PAGE)["first_agent.ts"].splitlines())
    assert f"a {lines}-line agent" in PAGE.read_text(encoding="utf-8")


def test_the_pages_agent_passes_the_main_scenario(folder: Path) -> None:
    [command] = blocks(PAGE)[0]
    agent = command.split('--agent "', 1)[1].rstrip('"')
    verdict = run(folder, agent, command.split()[4])
    assert verdict["scenario"] == "response_lost" and verdict["passed"], verdict["checks"]


def test_the_pages_mistake_is_caught_by_the_rule_it_names(folder: Path) -> None:
    mistake, run_it = blocks(PAGE)[1]
    subprocess.run(["bash", "-c", mistake], cwd=folder, check=True, timeout=60)
    assert (folder / "timeout_is_failure.ts").read_text() != (folder / "first_agent.ts").read_text(), \
        "the page's sed no longer changes the agent"
    verdict = run(folder, run_it.split('--agent "', 1)[1].rstrip('"'), run_it.split()[4])
    assert not verdict["passed"]
    failed = {check.split()[0] for check, status in verdict["checks"].items() if status == "failed"}
    assert "H006" in failed, verdict["checks"]
