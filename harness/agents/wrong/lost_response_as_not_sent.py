"""Wrong: a connection that closed without a response is logged not_sent ("it never went out"),
although the request had left the machine and the destination acted."""

from harness.agents.reference import Agent, Outcome, main


class LostResponseAsNotSent(Agent):
    def send(self, attempt_id, request, op):
        outcome = super().send(attempt_id, request, op)
        if outcome.dispatch_state == "sent_no_response":
            return Outcome(attempt_id, "not_sent", error="connection failed")
        return outcome


if __name__ == "__main__":
    main(LostResponseAsNotSent)
