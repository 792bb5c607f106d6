"""Wrong: mints a fresh idempotency key for every attempt, so the destination cannot deduplicate a retry."""

from tests.common.plain_agents import PlainAgent, main


class KeyPerRetry(PlainAgent):
    def key(self, intent, attempt):
        return f"plain-{intent['intent_id']}-{attempt}"


if __name__ == "__main__":
    main(KeyPerRetry)
