"""kind: wrong
flaw: a resolution cites every attempt and observation of the session so far (one global list), other operations' too
should: H015
scenarios: two_intents_one_run

(contract section 5, resolution `evidence`: the ids of the attempts, observations or approvals of this
operation, H015.)
"""
import sys

from base import Agent


class Flawed(Agent):
    seen: list = []

    def emit(self, event, op_id, **fields):
        if event in ("attempt", "observation"):
            self.seen.append(fields.get("attempt_id") or fields.get("observation_id"))
        super().emit(event, op_id, **fields)

    def resolve(self, op, state, refs, evidence, reason, **extra):
        super().resolve(op, state, refs, list(dict.fromkeys(self.seen)), reason, **extra)


if __name__ == "__main__":
    sys.exit(Flawed().run())
