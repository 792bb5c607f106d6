"""Runs the agent command under the harness contract, with a timeout and a clean teardown.

The agent runs in its own process group so that a timeout or a planned crash takes down everything
it started. A command starting with `python` runs with the harness's own interpreter, so that
`--agent "python -m mypkg.agent"` sees the same virtual environment as the harness.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import AgentError

REFERENCE_AGENT = "python -m harness.agents.reference"
KILL_GRACE_SECONDS = 2.0


@dataclass
class AgentRun:
    """How one run of the agent process ended."""

    command: str
    exit_status: int | None
    timed_out: bool
    killed_by_harness: bool
    seconds: float


def argv_for(command: str) -> list[str]:
    """The argv of an agent command given as shell words; an AgentError when it cannot be one."""
    if "\0" in command:
        raise AgentError(f"the agent command {command!r} holds a NUL character, which no program "
                         "argument can carry")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AgentError(f"the agent command {command!r} is not valid shell words ({exc}); "
                         "quote it as a shell would") from None
    if not argv:
        raise AgentError("the agent command is empty; give a command such as "
                         f"{REFERENCE_AGENT!r}")
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def run_agent(command: str, env: Mapping[str, str], *, timeout: float, stdout: Path, stderr: Path,
              cwd: Path | None = None, kill_when: Callable[[], bool] | None = None) -> AgentRun:
    """Run the agent to completion, or until `timeout`, or until `kill_when()` turns true (SIGKILL)."""
    argv = argv_for(command)
    full_env = {**os.environ, **env}
    start = time.monotonic()
    with stdout.open("ab") as out, stderr.open("ab") as err:
        try:
            proc = subprocess.Popen(argv, env=full_env, stdout=out, stderr=err, cwd=cwd,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise AgentError(f"cannot start agent {command!r}: {exc.strerror} ({argv[0]})") from None
        timed_out = killed = False
        try:
            while True:
                try:
                    proc.wait(timeout=0.02 if kill_when else timeout)
                    break
                except subprocess.TimeoutExpired:
                    pass
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
    return AgentRun(command, None if (timed_out or killed) else proc.returncode,
                    timed_out, killed, time.monotonic() - start)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    _kill_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc, signal.SIGKILL)
    proc.wait()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    proc.poll()
