"""The agent's orphan watch: ``python harness/agent_supervisor.py WATCH_FD STATUS_FD -- ARGV...``.

Started by ``harness.agent_process`` as the leader of a new process group; it runs the agent in that
same group and waits for it. ``WATCH_FD`` is the read end of a pipe whose only write end the
harness holds and never writes: end of file on it means the harness is gone (SIGKILL, OOM, crash),
and the supervisor then kills its whole group, so neither the agent nor its children outlive the
harness. End of file is the robust signal: no polling of parent pids, no race with pid reuse.

``STATUS_FD`` reports start-up: closed with nothing written once the agent runs, or one line
``cannot start: REASON`` when it cannot be started. The agent's exit status is the supervisor's
(an agent killed by a signal makes the supervisor die of the same signal).

Standard library only, and run as a file rather than a module, so that starting it costs an
interpreter start and nothing more (``harness/__init__`` is not imported).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def _kill_group_when_orphaned(watch_fd: int) -> None:
    while True:
        try:
            if not os.read(watch_fd, 4096):  # EOF: the harness's write end closed with the harness
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the agent, its children, and this supervisor


def main(argv: list[str]) -> int:
    watch_fd, status_fd = int(argv[0]), int(argv[1])
    command = argv[3:] if argv[2:3] == ["--"] else argv[2:]
    threading.Thread(target=_kill_group_when_orphaned, args=(watch_fd,), daemon=True).start()
    # The harness stops the agent with killpg(SIGTERM), which reaches us too: outlive the agent so its
    # exit status is reported. A handler (not SIG_IGN) so that the agent keeps the default action.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        agent = subprocess.Popen(command, close_fds=True)
    except OSError as exc:
        os.write(status_fd, f"cannot start: {exc.strerror or exc}\n".encode())
        return 127
    os.close(status_fd)
    while True:
        try:
            code = agent.wait()
            break
        except InterruptedError:
            continue
    if code < 0:  # killed by a signal: die of it too, so the harness sees what the agent got
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
