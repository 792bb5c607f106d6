"""Wrong: logs the answer it hoped for. A 5xx is written to the audit log as http_status 201 (its
retry logic still acts on the real status), so the log hides the failure the client received."""

from dataclasses import replace

from harness.agents.reference import Agent, main


class StatusMisreported(Agent):
    def log_attempt(self, op, outcome, request):
        if outcome.status is not None and outcome.status >= 500:
            outcome = replace(outcome, status=201)
        super().log_attempt(op, outcome, request)


if __name__ == "__main__":
    main(StatusMisreported)
