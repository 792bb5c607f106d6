"""kind: wrong
flaw: a replayed answer (Idempotent-Replayed: true) is read as "the key belongs to another request": resolved failed
should: H015, H006
scenarios: response_lost_key_replay

The retry after a lost response gets the first request's 201, replayed. The agent's client maps the replay
header to a conflict and resolves failed, while the destination holds the payment (contract section 4: a
replay carries the first answer's status and body, the same effect ref; section 8: failed must not have a
committed effect behind it, H015).
"""
import sys

from base import Agent


class Flawed(Agent):
    def on_success(self, op, attempt_id, outcome, refs):
        if (outcome.headers or {}).get("Idempotent-Replayed") == "true":
            return self.resolve(op, "failed", [], [attempt_id], "idempotency conflict: the key was already used")
        return super().on_success(op, attempt_id, outcome, refs)


if __name__ == "__main__":
    sys.exit(Flawed().run())
