"""Wrong: a new idempotency key on every attempt, and a blind retry after a lost response.

The key then deduplicates nothing: the destination commits once per attempt.
"""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class NewKeyPerAttempt(Agent):
    def idempotency_key(self, op, attempt_id):
        return new_id("key")

    def reconcile_then_retry(self, op):
        return False  # trusts its (useless) keys instead of looking the effect up


if __name__ == "__main__":
    main(NewKeyPerAttempt)
