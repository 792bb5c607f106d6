"""kind: wrong
flaw: writes "succeeded" into its state before sending (optimistic); after a crash it closes from that stale cache
should: H015, H025
scenarios: crash_after_dispatch

The state is updated optimistically and corrected on failure. Killed mid-attempt, the restarted agent
reads "succeeded" and resolves from it, citing the attempt id it never logged, with no effect named
(contract section 8: a resolution cites this operation's logged attempts or observations that prove the
state, H015, H025; section 10: the restarted agent reconciles first).
"""
import sys

from base import Agent


class Flawed(Agent):
    def send(self, op, attempt):
        op["cached"] = {"state": "succeeded", "attempt_id": attempt["attempt_id"]}
        self.save()
        return super().send(op, attempt)

    def handle(self, intent):
        op = self.state.get(intent["intent_id"])
        if op and not op["resolved"] and op.get("cached"):
            return self.resolve(op, op["cached"]["state"], [], [op["cached"]["attempt_id"]], "from the state cache")
        return super().handle(intent)


if __name__ == "__main__":
    sys.exit(Flawed().run())
