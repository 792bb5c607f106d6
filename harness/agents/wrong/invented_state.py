"""Wrong: invents its own dispatch state ("timeout") instead of the closed vocabulary, so a reader
cannot tell a request that never left from one whose answer was lost."""

from harness.agents.reference import Agent, Outcome, main


class InventedState(Agent):
    def send(self, attempt_id, request, op):
        outcome = super().send(attempt_id, request, op)
        if outcome.dispatch_state == "sent_no_response":
            return Outcome(attempt_id, "timeout", error=outcome.error)
        return outcome

    def next_step(self, op, outcome):
        if outcome.dispatch_state == "timeout":
            return self.after_unknown(op, "response_lost_after_dispatch", outcome)
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(InventedState)
