"""Wrong: logs the request headers it sent, Authorization included."""

from harness.agents.reference import Agent, main


class SecretInLog(Agent):
    def log_attempt(self, op, outcome, request):
        outcome.error = f"{outcome.error or 'ok'}; request headers: {request['headers']}"
        super().log_attempt(op, outcome, request)


if __name__ == "__main__":
    main(SecretInLog)
