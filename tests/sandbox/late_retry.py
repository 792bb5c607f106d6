"""An agent with a background retry (issue 44, goal 5): ``python late_retry.py DELAY``.

It does the work as the reference agent does, then, before it exits, double-forks a worker out of its process
group (``setsid``) that sends the same create again DELAY seconds after the agent exited, with no key and no log
line: the common bug of a retry queue still draining after the program said it was done. The worker counts from
the agent's exit itself (the end of a pipe only the agent still holds), not from the fork: on a loaded machine the
agent's own exit can take longer than DELAY, and a retry sent before it would be another story.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

from harness.agents.reference import Agent
from harness.agents.reference import main as reference_main


def main(delay: float) -> int:
    code = 0
    try:
        reference_main(Agent)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    intent = json.loads(open(os.environ["HARNESS_INTENTS"]).read())["intents"][0]
    url = os.environ["HARNESS_DESTINATION_" + intent["destination"].upper()] + "/tickets"
    exited, held = os.pipe()  # `exited` reads EOF once no process holds `held`: the agent, when it has exited
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(held)
            os.read(exited, 1)
            time.sleep(delay)
            request = urllib.request.Request(url, json.dumps(intent["params"]).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=5).read()
            except OSError:
                pass
            os._exit(0)
        os._exit(0)
    os.close(exited)
    return code


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1])))
