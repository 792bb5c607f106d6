"""kind: wrong
flaw: persists an attempt only once it is over (not before sending): a crash mid-attempt leaves no trace of it
should: H017
scenarios: crash_after_dispatch

The state dir holds the operation, but the attempt is written down after its answer. Killed while the
request is in flight, the restarted agent sees an operation with no attempt and sends "the first" one again,
never logging the request that crossed the wire (contract section 10, the order that survives a crash,
step 2; H017: every sent request is a logged attempt).
"""
import sys

from base import Agent


class Flawed(Agent):
    def dispatch(self, op, reason, decision):
        attempt = self.new_attempt(op, reason, decision)
        op["last_sent"] = attempt["sent_at"]
        outcome = self.send(op, attempt)  # written down once it is over
        refs = self.effect_refs(op, outcome)
        self.log_attempt(op, attempt, outcome, refs)
        return attempt["attempt_id"], outcome, refs


if __name__ == "__main__":
    sys.exit(Flawed().run())
