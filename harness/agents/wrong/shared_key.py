"""Wrong: one idempotency key for everything it does, so two different operations collide on the
destination (the second is answered with the first one's result, or rejected)."""

from harness.agents.reference import Agent, main


class SharedKey(Agent):
    def idempotency_key(self, op, attempt_id):
        return "agent-7-key"


if __name__ == "__main__":
    main(SharedKey)
