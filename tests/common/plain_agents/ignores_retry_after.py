"""Wrong: retries a 429 after its own short backoff, ignoring the Retry-After it was sent."""

from tests.common.plain_agents import PlainAgent, main


class IgnoresRetryAfter(PlainAgent):
    honours_retry_after = False
    backoff = 0.05


if __name__ == "__main__":
    main(IgnoresRetryAfter)
