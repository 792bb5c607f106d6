"""Wrong: never reads Retry-After. After a 429 it retries at once, and since it never looked at the
header its log has no ``retry_after_seconds``: only the journal records what the destination asked."""

from harness.agents.reference import Agent, main


class RetryAfterUnread(Agent):
    def send(self, attempt_id, request, op):
        outcome = super().send(attempt_id, request, op)
        outcome.headers.pop("retry-after", None)  # the header is never read, so never logged
        return outcome

    def next_step(self, op, outcome):
        if outcome.status == 429:
            return self.retry_if_budget(op, "rate_limited", outcome)  # no wait at all
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(RetryAfterUnread)
