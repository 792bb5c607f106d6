"""docs/your-api.md holds what it says: its agent and configuration, written out as the page gives them, run the
whole catalogue on the page's OpenAPI document with the counts and reasons the page prints; the same agent without
its Idempotency-Key fails on the rules the page names. Through the real plugin, fake, proxy and agent."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_command_blocks import REPO, declared_files

PAGE = REPO / "docs" / "your-api.md"
KEY_LINE = (" " * 24 + 'headers={"Idempotency-Key": f"ticket-{given.ref}"},  # one key per ticket, on every '
            "try\n")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples" / "openapi", tmp_path / "examples" / "openapi")
    for name, text in declared_files(PAGE).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", *args], cwd=folder,
                          capture_output=True, text=True, timeout=600)


def test_the_pages_agent_passes_every_scenario_that_applies_and_the_rest_are_listed(folder: Path) -> None:
    done = pytest_in(folder, "--scenario", "all")
    said = done.stdout + done.stderr
    counts = re.search(r"\(`(\d+) passed, (\d+) skipped`\)", PAGE.read_text(encoding="utf-8"))
    assert counts is not None
    assert f"{counts.group(1)} passed, {counts.group(2)} skipped" in said, said[-3000:]
    assert done.returncode == 0, said[-3000:]
    page = PAGE.read_text(encoding="utf-8")
    listed = re.findall(r"^(\w+: helpy .*)$", page, flags=re.M)
    assert listed
    for line in listed:
        assert line in said, line


def test_without_its_key_the_pages_agent_fails_on_the_rules_the_page_names(folder: Path) -> None:
    agent = folder / "helpy_agent.py"
    text = agent.read_text(encoding="utf-8")
    assert KEY_LINE in text
    agent.write_text(text.replace(KEY_LINE, ""), encoding="utf-8")
    done = pytest_in(folder, "--scenario", "response_lost", "--scenario", "request_lost")
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "2 failed" in said, said[-3000:]
    for code in ("H040", "H041"):
        assert code in said and code in PAGE.read_text(encoding="utf-8"), code
