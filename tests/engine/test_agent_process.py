"""The agent runner: real processes, the contract environment, timeouts that leave nothing behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.agent_process import argv_for, run_agent
from harness.errors import AgentError


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_exit_status_and_environment_are_passed(tmp_path: Path) -> None:
    code = "import os,sys; print(os.environ['HARNESS_AUDIT_LOG']); sys.exit(3)"
    run = run_agent(f"python -c \"{code}\"", {"HARNESS_AUDIT_LOG": "/x/log"}, timeout=20,
                    stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert run.exit_status == 3 and not run.timed_out
    assert (tmp_path / "out").read_text().strip() == "/x/log"


def test_python_means_the_harness_interpreter() -> None:
    assert argv_for("python -m harness.agents.reference")[0] == sys.executable


def test_timeout_kills_the_agent_and_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (f"import subprocess,sys,time; p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)")
    run = run_agent(f"python -c \"{code}\"", {}, timeout=1.0, stdout=tmp_path / "o", stderr=tmp_path / "e")
    assert run.timed_out and run.exit_status is None
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_kill_when_crashes_the_agent(tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    flag.write_text("")
    run = run_agent("python -c \"import time; time.sleep(60)\"", {}, timeout=30,
                    stdout=tmp_path / "o", stderr=tmp_path / "e", kill_when=flag.exists)
    assert run.killed_by_harness and run.exit_status is None and not run.timed_out


@pytest.mark.parametrize("command", ["", "   ", "definitely-not-a-program-xyz"])
def test_bad_commands_are_clear_errors(tmp_path: Path, command: str) -> None:
    with pytest.raises(AgentError, match="agent"):
        run_agent(command, {}, timeout=5, stdout=tmp_path / "o", stderr=tmp_path / "e")
