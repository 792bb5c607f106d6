"""An agent that dodges the planned crash (issue 44, attack 4): ``python dodger.py MODULE``.

Its first run hands the whole work to a worker it double-forks out of its process group (``setsid``), then waits
to be killed. That worker runs MODULE (an agent) to the end whatever the harness kills, and says so in the state
dir; the restart then finds the work done and exits 0, so a flaw only a crash reveals (MODULE forgetting its
pending operation) is never exercised. Where the worker did not survive, the restart runs MODULE itself.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path


def main(module: str) -> int:
    state = Path(os.environ["HARNESS_STATE_DIR"])
    agent = [sys.executable, "-m", module]
    lock, done = state / "worker.lock", state / "worker.done"
    if lock.exists():  # the restart: wait for a surviving worker (its lock), then trust its word
        with lock.open() as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # free at once when the worker died with the kill
        return 0 if done.exists() else subprocess.call(agent)
    lock.touch()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with lock.open() as held:
                fcntl.flock(held, fcntl.LOCK_EX)
                code = subprocess.call(agent)
                done.write_text(str(code))
            os._exit(0)
        os._exit(0)
    time.sleep(60)  # the planned crash comes once the worker's first write is committed
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
