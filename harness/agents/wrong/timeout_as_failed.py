"""Wrong: a lost response is logged as a failed attempt, then retried blindly with no key.

This is the 'request failed, retrying' log line the first article warns about.
"""

from harness.agents.reference import Agent, Outcome, main


class TimeoutAsFailed(Agent):
    def idempotency_key(self, op, attempt_id):
        return None

    def send(self, attempt_id, request, op):
        outcome = super().send(attempt_id, request, op)
        if outcome.dispatch_state == "sent_no_response":
            return Outcome(attempt_id, "execution_error", error="request failed, retrying")
        return outcome

    def next_step(self, op, outcome):
        if outcome.dispatch_state == "execution_error":
            return self.retry_if_budget(op, "connection_not_established", outcome)
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(TimeoutAsFailed)
