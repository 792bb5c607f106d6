"""kind: wrong
flaw: on restart, re-registers every open operation with the new process as its owner
should: H020
scenarios: crash_after_dispatch

The restarted process "takes ownership" of the operations it resumes by logging their operation event
again with its own session as owner (contract section 10: resume the same operation id and do not declare
it again under a new owner, H020).
"""
import sys

from base import Agent


class Flawed(Agent):
    def handle(self, intent):
        op = self.state.get(intent["intent_id"])
        if op and not op["resolved"]:
            self.declare(op, None)  # this process owns it now
        super().handle(intent)


if __name__ == "__main__":
    sys.exit(Flawed().run())
