"""Wrong: retries inside its HTTP client, so the log shows one attempt where the wire saw two."""

from harness.agents.reference import Agent, main


class UnloggedRetry(Agent):
    def send(self, attempt_id, request, op):
        outcome = super().send(attempt_id, request, op)
        if outcome.dispatch_state == "sent_no_response":
            outcome = super().send(attempt_id, request, op)  # silent retry, same attempt id
        return outcome


if __name__ == "__main__":
    main(UnloggedRetry)
