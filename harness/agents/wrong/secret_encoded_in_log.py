"""Wrong: logs the credential it sent base64-encoded, as if an encoding hid it (it is recoverable)."""

import base64

from harness.agents.reference import Agent, main


class SecretEncodedInLog(Agent):
    def log_attempt(self, op, outcome, request):
        sent = request["headers"].get("Authorization", "")
        encoded = base64.b64encode(sent.encode()).decode()
        outcome.error = f"{outcome.error or 'ok'}; credential sent (encoded): {encoded}"
        super().log_attempt(op, outcome, request)


if __name__ == "__main__":
    main(SecretEncodedInLog)
