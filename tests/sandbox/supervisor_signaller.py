"""An agent that does the work right, then tries to end its supervisor before it exits 0:
``python supervisor_signaller.py``.

It sends its parent (the supervisor, which reports its exit status to the harness) SIGSTOP, SIGINT, SIGTERM and
SIGKILL, and says on stderr what each did. In the sandbox the supervisor is the PID namespace's init, which takes
no signal from inside but those it handles (SIGTERM, a no-op there): the exit status it reports is the agent's
own. Had the signals landed, the harness would have heard no status (the run's exit then bubblewrap's 137).
"""

from __future__ import annotations

import os
import signal
import sys

from harness.agents.reference import Agent


def main() -> int:
    Agent().run()
    supervisor = os.getppid()
    for sig in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(supervisor, sig)
            print(f"{sig.name} to {supervisor}: sent", file=sys.stderr)
        except OSError as exc:
            print(f"{sig.name} to {supervisor}: {exc.strerror}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
