"""Wrong: labels every retry ``retry_reason: rate_limited``, whatever happened to the attempt it
retries (a lost response, a 5xx, a refused connection), although no 429 ever crossed the wire."""

from harness.agents.reference import Agent, main


class EveryRetryRateLimited(Agent):
    def next_step(self, op, outcome):
        reason = super().next_step(op, outcome)
        return "rate_limited" if reason is not None else None


if __name__ == "__main__":
    main(EveryRetryRateLimited)
