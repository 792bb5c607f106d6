"""The agent runner: real processes, the contract environment, timeouts that leave nothing behind.

Unsandboxed (``HARNESS_SANDBOX=off``): these agents tell the test their pids through files in the test's own
folder, which the sandbox hides; the process group is what these test. The sandbox's own: tests/sandbox."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.agent_process import argv_for, run_agent
from harness.contract import OPERATOR_ENV, SANDBOX_ENV
from harness.errors import AgentError


@pytest.fixture(autouse=True)
def unsandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SANDBOX_ENV, "off")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever inherited it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_exit_status_and_environment_are_passed(tmp_path: Path) -> None:
    code = "import os,sys; print(os.environ['HARNESS_AUDIT_LOG']); sys.exit(3)"
    run = run_agent(f"python -c \"{code}\"", {"HARNESS_AUDIT_LOG": "/x/log"}, timeout=20,
                    stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert run.exit_status == 3 and not run.timed_out
    assert (tmp_path / "out").read_text().strip() == "/x/log"


@pytest.mark.parametrize("name", OPERATOR_ENV)
def test_the_operators_settings_never_reach_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    """The checkpoint key (the agent must not sign its own log) and the proxy runtime's settings."""
    monkeypatch.setenv(name, "off" if name == SANDBOX_ENV else str(tmp_path / "operator-setting"))
    monkeypatch.setenv("SOME_OTHER_SETTING", "kept")
    code = f"import os; print(os.environ.get({name!r}), os.environ.get('SOME_OTHER_SETTING'))"
    run = run_agent(f"python -c \"{code}\"", {}, timeout=20, stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert run.exit_status == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").read_text().split() == ["None", "kept"]


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


FAKE_HARNESS = r"""
import sys
from pathlib import Path
from harness.agent_process import run_agent
folder = Path(sys.argv[1])
agent = ("python -c \"import subprocess,sys,time,os; "
         "p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(120)']); "
         "open(sys.argv[1],'w').write(f'{os.getpid()} {p.pid}'); time.sleep(120)\" " + str(folder / "pids"))
run_agent(agent, {}, timeout=120, stdout=folder / "o", stderr=folder / "e")
"""


def test_the_agent_and_its_children_do_not_outlive_a_sigkilled_harness(tmp_path: Path) -> None:
    import signal
    import subprocess

    harness = subprocess.Popen([sys.executable, "-c", FAKE_HARNESS, str(tmp_path)], start_new_session=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "pids").exists() or not (tmp_path / "pids").read_text():
            assert time.monotonic() < deadline and harness.poll() is None, "the agent never started"
            time.sleep(0.02)
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert all(alive(pid) for pid in pids)
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        deadline = time.monotonic() + 10
        while any(running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(running(pid) for pid in pids), "the agent outlived the harness"
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if harness.poll() is None:
            harness.kill()
            harness.wait(10)


def test_a_planned_crash_leaves_no_process_of_the_agent_group(tmp_path: Path) -> None:
    from harness.agent_process import group_alive

    pidfile = tmp_path / "pids"
    code = (f"import subprocess,sys,time,os; p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(f'{{os.getpid()}} {{p.pid}} {{os.getpgid(0)}}'); time.sleep(60)")
    run = run_agent(f"python -c \"{code}\"", {}, timeout=30, stdout=tmp_path / "o", stderr=tmp_path / "e",
                    kill_when=lambda: pidfile.exists() and bool(pidfile.read_text()))
    assert run.killed_by_harness
    agent, child, group = (int(p) for p in pidfile.read_text().split())
    assert group != os.getpgid(0)  # the agent ran in a group of its own (the supervisor's)
    assert not group_alive(group)  # the agent and its child are gone (at most unreaped zombies) when run_agent returns
    assert not running(agent) and not running(child)
