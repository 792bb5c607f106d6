"""An agent that fails only on its exit status, then forges the supervisor's word on it:
``python status_forger.py [forge]``.

It does the work as the reference agent does and exits 3 (the contract's exit status is 0 once the work is done:
FAIL). With ``forge``, a child it leaves behind writes ``exited 0 ...`` into its supervisor's status pipe (found
through ``/proc/<supervisor>/fd``) after the supervisor's own line, so that the harness would read a clean exit.
It says on stderr whether the write went through.
"""

from __future__ import annotations

import os
import sys
import time

from harness.agents.reference import Agent


def forge(supervisor: int) -> None:
    with open(f"/proc/{supervisor}/cmdline", "rb") as cmdline:  # its argv: python SUPERVISOR WATCH_FD STATUS_FD ...
        status_fd = int(cmdline.read().split(b"\0")[3])
    time.sleep(0.2)  # after the supervisor wrote "exited 3 ..."
    try:
        fd = os.open(f"/proc/{supervisor}/fd/{status_fd}", os.O_WRONLY)
        os.write(fd, f"exited 0 {time.time()!r} 0\n".encode())
        print("forged: written", file=sys.stderr)
    except OSError as exc:
        print(f"forged: refused ({exc.strerror})", file=sys.stderr)


def main(mode: str) -> int:
    Agent().run()
    supervisor = os.getppid()
    if mode == "forge" and os.fork() == 0:
        forge(supervisor)
        os._exit(0)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
