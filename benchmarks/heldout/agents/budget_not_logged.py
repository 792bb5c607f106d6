"""kind: wrong
flaw: retries carry no attempt_budget_remaining (the retry loop's counter is not passed to the logger)
should: H009, H008
scenarios: response_lost_key_replay, request_lost, rate_limited

(contract section 5, attempt: attempt_budget_remaining is required on every retry; section 7, H009.)
"""
import sys

from base import Agent


class Flawed(Agent):
    def emit(self, event, op_id, **fields):
        if event == "attempt":
            fields.pop("attempt_budget_remaining", None)
        super().emit(event, op_id, **fields)


if __name__ == "__main__":
    sys.exit(Flawed().run())
