"""Runs the agent command under the harness contract, with a timeout and a clean teardown.

The agent runs in its own process group so that a timeout or a planned crash takes down everything
it started; that group is led by ``agent_supervisor``, which kills it when the harness disappears
(even by SIGKILL), so no agent outlives the harness. A command starting with `python` runs with the
harness's own interpreter, so that `--agent "python -m mypkg.agent"` sees the same virtual environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from harness import notices
from harness.contract import AUDIT_LOG_ENV, OPERATOR_ENV, agent_words
from harness.errors import AgentError
from harness.results.scenario_result import AgentRun

SUPERVISOR = Path(__file__).with_name("agent_supervisor.py")  # run as a file: no package import
KILL_GRACE_SECONDS = 2.0
STILL_RUNNING_EVERY = 10.0  # seconds between two "still running" notices while an agent works
GROUP_GONE_SECONDS = 5.0  # how long the harness waits for a SIGKILLed agent group to be reaped


def log_size(env: Mapping[str, str]) -> int:
    """The size of the audit log named in the contract environment ``env`` (0 while the agent wrote none)."""
    try:
        return os.stat(env[AUDIT_LOG_ENV]).st_size
    except (KeyError, OSError):
        return 0


def argv_for(command: str) -> list[str]:
    """The argv of an agent command given as shell words; an AgentError when it cannot be one."""
    try:
        argv = agent_words(command)
    except ValueError as exc:
        raise AgentError(f"the agent command {command!r} {exc}") from None
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def run_agent(command: str, env: Mapping[str, str], *, timeout: float, stdout: Path, stderr: Path,
              cwd: Path | None = None, kill_when: Callable[[], bool] | None = None) -> AgentRun:
    """Run the agent to completion, or until `timeout`, or until `kill_when()` turns true (SIGKILL).

    `cwd`: the agent's working folder (default: this process's; the engine passes the caller's folder), where
    a relative program or script in `command` is looked up."""
    argv = argv_for(command)
    # the operator's checkpoint key is the harness's: an agent that could read it could forge the checkpoint
    full_env = {k: v for k, v in os.environ.items() if k not in OPERATOR_ENV} | dict(env)
    start, started_at = time.monotonic(), time.time()
    with stdout.open("ab") as out, stderr.open("ab") as err, _OrphanWatch() as watch:
        proc = subprocess.Popen([sys.executable, str(SUPERVISOR), str(watch.read_end), str(watch.status_write),
                                 "--", *argv], env=full_env, stdout=out, stderr=err, cwd=cwd,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                pass_fds=(watch.read_end, watch.status_write))
        problem = watch.started()
        if problem:
            proc.wait()
            raise AgentError(f"cannot start agent {command!r}: {problem} ({argv[0]})")
        timed_out = killed = False
        said_at = start
        try:
            while True:
                try:
                    # in steps: the crash trigger is polled, and a long wait says it is waiting (harness.notices)
                    proc.wait(timeout=0.02 if kill_when else max(0.01, min(timeout - (time.monotonic() - start),
                                                                          STILL_RUNNING_EVERY)))
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - said_at >= STILL_RUNNING_EVERY:
                    said_at = time.monotonic()
                    notices.say(f"retry-harness: the agent is still running ({said_at - start:.0f} s of its "
                                f"{timeout:g} s limit; --agent-timeout sets it)\n")
                if kill_when is not None and kill_when():
                    _kill_group(proc, signal.SIGKILL)
                    killed = True
                    break
                if time.monotonic() - start >= timeout:
                    timed_out = True
                    break
        finally:
            if proc.poll() is None or timed_out:
                _terminate(proc)
            else:
                _kill_group(proc, signal.SIGKILL)  # children the agent left behind
            _wait_group_gone(proc.pid)  # a planned crash restarts the agent only once nothing of it is left
    return AgentRun(command, None if (timed_out or killed) else proc.returncode,
                    timed_out, killed, time.monotonic() - start, started_at, time.time(), log_size(env))


class _OrphanWatch:
    """The two pipes of ``agent_supervisor``: the watch pipe (only this process holds its write end,
    so the supervisor reads end of file when the harness dies, however it dies) and the start-up
    status pipe."""

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()  # non-inheritable: no other child holds the write end
        self._status_read, self.status_write = os.pipe()

    def started(self) -> str:
        """Wait for the supervisor to start the agent: "" when it runs, else why it could not start."""
        os.close(self.status_write)
        self.status_write = -1
        chunks = []
        while chunk := os.read(self._status_read, 4096):
            chunks.append(chunk)
        text = b"".join(chunks).decode(errors="replace").strip()
        return text.removeprefix("cannot start: ")

    def __enter__(self) -> _OrphanWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.read_end, self._write_end, self._status_read, self.status_write):
            if fd >= 0:
                os.close(fd)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    _kill_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc, signal.SIGKILL)
    proc.wait()


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. A zombie (dead, waiting for whoever inherited it to
    reap it; some container inits take a second) does not count: it holds nothing and does nothing."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, group = stat[stat.rindex(")") + 2:].split()[:3]  # after "pid (comm) "
        if int(group) == pgid and state not in ("Z", "X"):
            return True
    return False


def _wait_group_gone(pgid: int, timeout: float = GROUP_GONE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            raise AgentError(f"the agent's process group {pgid} survived SIGKILL for {timeout:g} s")
        _kill_group_id(pgid, signal.SIGKILL)
        time.sleep(0.01)


def _kill_group_id(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    proc.poll()
