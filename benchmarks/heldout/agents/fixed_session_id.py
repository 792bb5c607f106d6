"""kind: wrong
flaw: session_id is a constant from the agent's config, the same for every process (restarts included)
should: H060, H020
scenarios: crash_after_dispatch

(contract section 5: session_id is one run of the agent process: a new one each time a process starts, a
restart included.) The restarted run's events read as the killed run's.
"""
import sys

from base import Agent


class Flawed(Agent):
    def __init__(self):
        super().__init__()
        self.session = "ses_agent"


if __name__ == "__main__":
    sys.exit(Flawed().run())
