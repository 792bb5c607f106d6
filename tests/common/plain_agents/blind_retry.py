"""Wrong: retries a POST on any exception (or 5xx) without an idempotency key."""

from tests.common.plain_agents import PlainAgent, main


class BlindRetry(PlainAgent):
    def key(self, intent, attempt):
        return None


if __name__ == "__main__":
    main(BlindRetry)
