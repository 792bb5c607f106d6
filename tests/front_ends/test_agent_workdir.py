"""The agent works in the caller's folder: `--agent "python my_agent.py"` with a relative path works from
the folder `python -m harness run` or pytest was started in, and every path the agent is handed is
absolute. Real subprocesses, started from a temp folder as a user would (`cwd=`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, STATE_DIR_ENV

WHERE_LINE = "where: "  # the agent's stderr line saying where it works (its folder is read-only in the sandbox)

# A tiny agent file: it says where it works and what it was handed, then does the work of the reference agent.
AGENT_SOURCE = f'''
import json, os, sys

print({WHERE_LINE!r} + json.dumps({{"cwd": os.getcwd(), "paths": {{name: os.environ[name] for name in
      ({INTENTS_ENV!r}, {AUDIT_LOG_ENV!r}, {STATE_DIR_ENV!r})}}}}), file=sys.stderr, flush=True)

from harness.agents.reference import main

main()
'''


def write_agent(folder: Path, relative: str, *, executable: bool = False) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((f"#!{sys.executable}\n" if executable else "") + AGENT_SOURCE)
    if executable:
        path.chmod(0o755)
    return path


def assert_ran_in(caller: Path, evidence_root: Path) -> None:
    [folder] = evidence_root.iterdir()
    said = (folder / "agent.stderr").read_text()
    where = json.loads(next(line for line in said.splitlines() if line.startswith(WHERE_LINE))[len(WHERE_LINE):])
    assert where["cwd"] == str(caller)
    for name, value in where["paths"].items():
        assert Path(value).is_absolute() and Path(value).is_relative_to(evidence_root.resolve()), (name, value)
    context = json.loads((folder / "context.json").read_text())
    assert context["agent"]["cwd"] == str(caller)


def harness(caller: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=caller, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("command, relative, executable", [
    ("python my_agent.py", "my_agent.py", False),
    ("python agents/my_agent.py", "agents/my_agent.py", False),
    ("./my_agent", "my_agent", True),
])
def test_cli_runs_a_relative_agent_from_the_callers_folder(tmp_path: Path, command: str, relative: str,
                                                           executable: bool) -> None:
    caller = tmp_path / "project"
    write_agent(caller, relative, executable=executable)
    out = harness(caller, "run", "response_lost", "--agent", command)  # the default ./evidence
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"with agent '{command}': PASS" in out.stdout
    assert_ran_in(caller, caller / "evidence")


def test_cli_runs_a_relative_node_agent_from_the_callers_folder(tmp_path: Path) -> None:
    """`--agent "node agent.js"`: a program that is not Python finds its script in the caller's folder
    (this one hands the work to the Python agent above, which says where it ran)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    caller = tmp_path / "project"
    write_agent(caller, "my_agent.py")
    (caller / "agent.js").write_text(
        "const {spawnSync} = require('child_process');\n"
        f"const r = spawnSync({json.dumps(sys.executable)}, ['my_agent.py'], {{stdio: 'inherit'}});\n"
        "process.exit(r.status === null ? 1 : r.status);\n")
    out = harness(caller, "run", "response_lost", "--agent", "node agent.js")
    assert out.returncode == 0, out.stdout + out.stderr
    assert_ran_in(caller, caller / "evidence")


def test_a_relative_agent_that_is_not_in_the_callers_folder_is_a_clear_error(tmp_path: Path) -> None:
    write_agent(tmp_path / "elsewhere", "my_agent")  # not executable from here: not in the caller's folder
    caller = tmp_path / "project"
    caller.mkdir()
    out = harness(caller, "run", "response_lost", "--agent", "./my_agent")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot start agent './my_agent': No such file or directory" in out.stderr
    assert "Traceback" not in out.stderr


def test_pytest_runs_a_relative_agent_from_the_folder_it_was_started_in(pytester: pytest.Pytester) -> None:
    caller = pytester.path  # runpytest_subprocess starts pytest in this folder
    write_agent(caller, "my_agent.py")
    evidence = caller / "kept"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scenario", "response_lost",
                                           "--agent", "python my_agent.py", "--evidence-dir", str(evidence),
                                           timeout=120)
    result.assert_outcomes(passed=1)
    assert_ran_in(caller, evidence)


def test_a_caller_folder_removed_before_the_run_is_a_clear_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m harness run response_lost --evidence-dir "$1"'
    out = subprocess.run(["sh", "-c", script, sys.executable, str(tmp_path / "evidence")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("error: the current folder no longer exists") and "Traceback" not in out.stderr
