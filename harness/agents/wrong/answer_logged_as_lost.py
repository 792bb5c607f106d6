"""Wrong: logs a 5xx answer as a lost response (sent_no_response, no status), so the log hides what
the destination said; its handling is the reference's (a 5xx is treated as unknown either way)."""

from dataclasses import replace

from harness.agents.reference import Agent, main


class AnswerLoggedAsLost(Agent):
    def log_attempt(self, op, outcome, request):
        if outcome.status is not None and outcome.status >= 500:
            outcome = replace(outcome, dispatch_state="sent_no_response", status=None, body=None,
                              error="no usable response")
        super().log_attempt(op, outcome, request)


if __name__ == "__main__":
    main(AnswerLoggedAsLost)
