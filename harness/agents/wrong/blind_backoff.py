"""Wrong: exponential backoff on every failure, ignoring Retry-After and never reconciling.

Backoff lowers the pressure on a failing service; it does not make an unknown write safe.
"""

import time

from harness.agents.reference import Agent, main


class BlindBackoff(Agent):
    backoff = 0.05

    def next_step(self, op, outcome):
        status = outcome.status or 0
        if outcome.dispatch_state == "response_received" and status < 400:
            return super().next_step(op, outcome)
        if outcome.dispatch_state == "response_received" and status not in (429,) and status < 500:
            return super().next_step(op, outcome)
        time.sleep(self.backoff * 2 ** len(op["attempts"]))
        reason = "rate_limited" if status == 429 else "destination_5xx" if status >= 500 else \
            "response_lost_after_dispatch"
        return self.retry_if_budget(op, reason, outcome)


if __name__ == "__main__":
    main(BlindBackoff)
