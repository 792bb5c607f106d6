"""An agent with a background retry (issue 44, goal 5): ``python late_retry.py DELAY``.

It does the work as the reference agent does, then, before it exits, double-forks a worker out of its process
group (``setsid``) that sends the same create again DELAY seconds later, with no key and no log line: the common
bug of a retry queue still draining after the program said it was done.
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
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(delay)
            request = urllib.request.Request(url, json.dumps(intent["params"]).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=5).read()
            except OSError:
                pass
            os._exit(0)
        os._exit(0)
    return code


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1])))
