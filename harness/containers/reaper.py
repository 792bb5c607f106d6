"""The containers' orphan watch: ``python -m harness.containers.reaper OWNER``.

Started once per harness process by ``harness.containers.docker_client.client()``, with stdin the read end of a
pipe whose only write end that process holds and never writes. End of file means the harness is gone,
however it ended (normal exit, SIGKILL, OOM): the reaper then removes every container, network and
volume labelled with ``OWNER``. Normally the harness has removed them itself and this finds nothing; after
a SIGKILL it is the only cleanup there is. End of file is the robust signal, as for
``harness/agent_supervisor.py``: no polling of parent pids, no race with pid reuse.
"""

from __future__ import annotations

import os
import signal
import sys

from harness.containers.docker_client import connect, remove_ours
from harness.errors import HarnessError


def wait_for_end_of_file(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 4096):
                return
        except InterruptedError:
            continue
        except OSError:
            return


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0]:
        print("usage: python -m harness.containers.reaper OWNER", file=sys.stderr)
        return 2
    owner = argv[0]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the harness must not stop its cleanup
    engine = connect()  # now, while the harness is alive: it has just reached the same engine
    wait_for_end_of_file(sys.stdin.fileno())
    try:
        removed = remove_ours(owner, engine=engine)
    except HarnessError as exc:
        print(f"retry-harness reaper {owner}: {exc}", file=sys.stderr)
        return 1
    if any(removed.values()):
        print(f"retry-harness reaper: removed what harness {owner} left: "
              + "; ".join(f"{kind} {', '.join(names)}" for kind, names in removed.items() if names),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
