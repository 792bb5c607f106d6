"""The agent's orphan watch: ``python harness/agent_supervisor.py WATCH_FD STATUS_FD WINDOW [--sandboxed] -- ARGV...``.

Started by ``harness.agent_process`` as the leader of a new process group (or, ``--sandboxed``, as the init of
the agent's bubblewrap sandbox, ``harness.sandbox``: pid 1 of its PID namespace, so the kernel ends every process
of it when this one ends, and reaps what the agent orphaned here); it runs the agent in that same group and
waits for it. ``WATCH_FD`` is the read end of a pipe whose only write end the
harness holds and never writes: end of file on it means the harness is gone (SIGKILL, OOM, crash),
and the supervisor then kills its whole group, so neither the agent nor its children outlive the
harness. End of file is the robust signal: no polling of parent pids, no race with pid reuse.

``STATUS_FD`` reports, one line each: ``started`` once the agent runs (``started pid:[N]`` in a sandbox: its PID
namespace, by which the harness finds its processes; or ``cannot start: REASON``), then
``exited CODE TIME LEFT`` when the agent's own process ends (its status, negative for a signal; the wall
clock; how many processes it left running), then ``outlived N``: how many of those still ran when the window
closed. What it left gets ``WINDOW`` seconds (``harness.agent_process.LATE_WINDOW_SECONDS``) to finish before
the supervisor exits (and its group is killed, or its sandbox with it): what they send meanwhile is on the
wire after the agent exited, a finding (H062), not lost. The agent's exit status is the supervisor's (an agent
killed by a signal makes the supervisor die of the same signal; an init cannot, so in a sandbox it exits 128 + the
signal's number, as bubblewrap reports a signal).

Standard library only, and run as a file rather than a module, so that starting it costs an
interpreter start and nothing more (``harness/__init__`` is not imported).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def _others(sandboxed: bool) -> int:
    """How many processes of the agent besides this one are still running (zombies excepted): in the sandbox,
    every process its /proc shows but its init; else those of this process group."""
    me, group = os.getpid(), os.getpgid(0)
    count = 0
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) in (me, 1 if sandboxed else me):
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, pgid = stat[stat.rindex(")") + 2:].split()[:3]
        if state not in ("Z", "X") and (sandboxed or int(pgid) == group):
            count += 1
    return count


def _undumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)`` on Linux (see the module's docstring); nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # here: only where it is used, on Linux

    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # 4: PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def _kill_group_when_orphaned(watch_fd: int, sandboxed: bool) -> None:
    why = "end of file"
    while True:
        try:
            if not os.read(watch_fd, 4096):  # EOF: the harness's write end closed with the harness
                break
        except InterruptedError:
            continue
        except OSError as exc:
            why = exc.strerror or str(exc)
            break
    # said on the agent's stderr (agent.stderr), should a harness still be there to read it
    try:
        os.write(2, f"agent supervisor: the harness is gone ({why} on its watch pipe): the agent is killed\n".encode())
    except OSError:
        pass
    if sandboxed:  # every process of the sandbox but its init, which then ends with us and takes the rest
        os.kill(-1, signal.SIGKILL)
        os._exit(137)
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the agent, its children, and this supervisor


def main(argv: list[str]) -> int:
    watch_fd, status_fd, window = int(argv[0]), int(argv[1]), float(argv[2])
    rest = argv[3:]
    sandboxed = rest[:1] == ["--sandboxed"]
    rest = rest[1:] if sandboxed else rest
    command = rest[1:] if rest[:1] == ["--"] else rest
    _undumpable()  # before the agent starts: its status pipe is out of the agent's reach
    threading.Thread(target=_kill_group_when_orphaned, args=(watch_fd, sandboxed), daemon=True).start()
    # The harness stops the agent with killpg(SIGTERM), which reaches us too: outlive the agent so its
    # exit status is reported. A handler (not SIG_IGN) so that the agent keeps the default action.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    if sandboxed:  # an init takes only the signals it handles: Python's Ctrl-C handler would let the agent end us
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        agent = subprocess.Popen(command, close_fds=True)
    except OSError as exc:
        os.write(status_fd, f"cannot start: {exc.strerror or exc}\n".encode())
        return 127
    namespace = _link("/proc/self/ns/pid") if sandboxed else ""
    os.write(status_fd, f"started {namespace}".strip().encode() + b"\n")
    code = _wait_reaping(agent.pid)
    exited_at, left = time.time(), _others(sandboxed)
    os.write(status_fd, f"exited {code} {exited_at!r} {left}\n".encode())
    deadline = time.monotonic() + window
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        _reap()
        left = _others(sandboxed)
    os.write(status_fd, f"outlived {left}\n".encode())  # still running past the window: killed as we exit
    os.close(status_fd)
    if code < 0:  # killed by a signal: die of it too, so the harness sees what the agent got
        if sandboxed:
            os._exit(128 - code)
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _wait_reaping(pid: int) -> int:
    """Wait for the agent's process ``pid``, reaping whatever else ends meanwhile (as the sandbox's init, the
    processes the agent orphaned are ours): its exit status, negative for a signal."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if done == pid:
            return os.waitstatus_to_exitcode(status)


def _reap() -> None:
    """Reap the orphans that ended (a zombie holds a pid of the sandbox's ceiling until then)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
