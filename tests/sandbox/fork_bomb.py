"""A fork bomb, bounded so that a test can count it: forks up to COUNT children that each sleep, prints how many
forks succeeded before the kernel refused one (EAGAIN), then exits (its children die with the run)."""

import os
import sys
import time

COUNT = int(sys.argv[1])
made = 0
for _ in range(COUNT):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)  # the parent's output ends when it does, not the children's
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        time.sleep(60)
        os._exit(0)
    made += 1
print(f"forked {made}", flush=True)
