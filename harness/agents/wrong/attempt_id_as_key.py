"""Wrong: uses the attempt id as the idempotency key, so each retry carries a new key."""

from harness.agents.reference import Agent, main


class AttemptIdAsKey(Agent):
    def idempotency_key(self, op, attempt_id):
        return attempt_id or None


if __name__ == "__main__":
    main(AttemptIdAsKey)
