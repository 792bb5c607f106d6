"""Every command block of the README and of docs/*.md runs as written (issue 32): each ```sh block, line by
line, in a folder of its own that holds what a user who cloned the repository has (examples/) and the files
the page itself declares (a code block whose first line is `# file: NAME`). A command may end FAILED (exit
1: the page shows a wrong agent, a duplicate in a production log), never in a usage error, an unusable input
or a traceback.

The blocks not run here, each with where it is run instead, are listed in NOT_HERE."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# (page, first command of the block) -> where that block runs instead
NOT_HERE = {
    ("matrix.md", "pip install -e '.[test,certify]'      # uv, which makes one environment per certified SDK "
                  "release"): "tests/certification runs every cell of python -m certification, each in its environment",
    ("matrix.md", 'python -m harness run response_lost --agent "python -m harness.agents.frameworks.langgraph_agent"'
                  "           # PASS"): "tests/certification/test_framework_matrix.py runs these agents and rows",
    ("first-agent.md", 'pytest --scenario all -m http --agent "python first_agent.py" -n 2'):
        "tests/docs/test_first_agent.py runs the page's agent on every HTTP scenario and holds the table to it",
    ("first-agent-typescript.md", 'python -m harness run response_lost --agent "node first_agent.ts"'):
        "tests/docs/test_first_agent_typescript.py runs it with the test extra's Node 24 and holds it to the page",
    ("first-agent-typescript.md", "sed 's/state: \"unknown\", evidence/state: \"failed\", evidence/' "
                                  "first_agent.ts > timeout_is_failure.ts"):
        "tests/docs/test_first_agent_typescript.py runs it with the test extra's Node 24 and holds it to the page",
    ("your-api.md", "pytest --scenario all -n 2"):
        "tests/docs/test_your_api.py runs the page's agent and configuration and holds the page's counts to it",
    ("using.md", "pytest -p xdist --dist load --scenario=all --evidence-dir=evidence --junitxml=junit.xml    "
                 "--tx 'ssh=ci@build-a//python=/opt/ci/venv/bin/python//chdir=/srv/ci/checkout'    "
                 "--tx 'ssh=ci@build-b//python=/home/ci/env/bin/python//chdir=/home/ci/checkout'"):
        "tests/containers/test_ssh_workers.py runs it over two sshd containers, the harness at its own path in each",
}
# the README's two commands: the first runs below on a fresh venv, the second is .ci/run itself
README_ELSEWHERE = ("test_the_readmes_first_command_runs_on_a_fresh_venv, below (marker install)",
                    ".ci/run, which is this very command")


def blocks(page: Path) -> list[list[str]]:
    """The page's ```sh blocks, each as its commands (a line ending in a backslash continues)."""
    found = []
    for body in re.findall(r"^```sh\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.M | re.S):
        commands: list[str] = []
        pending = ""
        for line in body.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            command = (pending + line).strip()
            pending = ""
            if command and not command.startswith("#"):
                commands.append(command)
        found.append(commands)
    return found


def declared_files(page: Path) -> dict[str, str]:
    """The files a page writes out for its reader: code blocks whose first line is `# file: NAME`."""
    files = {}
    for body in re.findall(r"^```\w*\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.M | re.S):
        first, _, rest = body.partition("\n")
        if first.startswith("# file: "):
            files[first.removeprefix("# file: ").strip()] = rest
    return files


# Blocks whose commands are independent of one another, each run as a test of its own (in a folder of its own) so
# that the workers share the block: docs/using.md's first ran 25 commands one after the other, 720 s in one test,
# the suite's longest. A command that reads what an earlier one kept (`evidence/`) runs after the block's first.
SPLIT = {("using.md", 0)}


def cases(page: Path) -> list[tuple[Path, str, list[str]]]:
    """The page's blocks as tests: (page, id, commands), a SPLIT block as one test a command."""
    found: list[tuple[Path, str, list[str]]] = []
    for n, commands in enumerate(blocks(page)):
        if not commands:
            continue
        if (page.name, n) not in SPLIT:
            found.append((page, str(n), commands))
            continue
        readers = [c for c in commands[1:] if "evidence/" in c]
        found.append((page, f"{n}.0", [commands[0], *readers]))
        found += [(page, f"{n}.{i}", [c]) for i, c in enumerate(commands) if i and c not in readers]
    return found


CASES = [case for page in PAGES for case in cases(page)]


def where_else(page: Path, n: str, commands: list[str]) -> str | None:
    if page.name == "index.md":  # the site's home repeats the README's two commands (held equal below)
        return "the README's own block"
    if page.name == "README.md" and n.isdigit() and int(n) < len(README_ELSEWHERE):
        return README_ELSEWHERE[int(n)]
    return NOT_HERE.get((page.name, commands[0]))


@pytest.mark.parametrize(("page", "n", "commands"), CASES, ids=[f"{p.name}-{n}" for p, n, _ in CASES])
def test_a_command_block_runs_as_written(page: Path, n: str, commands: list[str], tmp_path: Path) -> None:
    elsewhere = where_else(page, n, commands)
    if elsewhere:
        pytest.skip(f"run by {elsewhere}")
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("sample-orders"))
    for name, text in declared_files(page).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "NO_COLOR": "1"}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        said = (f"{page.name} block {n}: {command}\n--- exit {done.returncode}\n"
                f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
        assert done.returncode in (0, 1), said
        assert "Traceback" not in done.stdout + done.stderr, said


def test_the_sites_home_repeats_the_readmes_two_commands() -> None:
    assert blocks(REPO / "docs" / "index.md") == blocks(REPO / "README.md")[:2]


def test_every_not_here_entry_names_a_block_that_exists() -> None:
    firsts = {(page.name, commands[0]) for page, _, commands in CASES}
    assert set(NOT_HERE) <= firsts, set(NOT_HERE) - firsts


def test_a_split_block_runs_every_command_once() -> None:
    for name, n in SPLIT:
        page = next(p for p in PAGES if p.name == name)
        run = [c for case_page, case, commands in CASES if case_page == page and case.split(".")[0] == str(n)
               for c in commands]
        assert sorted(run) == sorted(blocks(page)[n]), (name, n)


@pytest.mark.install
def test_the_readmes_first_command_runs_on_a_fresh_venv(tmp_path: Path) -> None:
    """The main job on a fresh machine, as the README writes it, in a copy of the repository."""
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    checkout = tmp_path / "retry-harness"
    for name in listed.splitlines():
        source = REPO / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    (command,) = blocks(REPO / "README.md")[0]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.executable).parent)))
    done = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout, done.stdout[-2000:]
