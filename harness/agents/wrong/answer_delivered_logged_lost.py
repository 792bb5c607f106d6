"""Wrong: logs an answer it received as lost. A 2xx that reached the client is written sent_no_response (no
status) and reconciled by lookup, as a lost answer would be; each attempt is stamped when it was sent, as the
contract asks, so nothing but the wire says the answer came back (H028, the claims table's dispatch state)."""

import time
from dataclasses import replace

from harness.agents.reference import Agent, main


class AnswerDeliveredLoggedLost(Agent):
    def send(self, attempt_id, request, op):
        self.sent_at = time.time()
        outcome = super().send(attempt_id, request, op)
        if outcome.status is not None and 200 <= outcome.status < 300:
            outcome = replace(outcome, dispatch_state="sent_no_response", status=None, body=None, headers={},
                              error="no usable response")
        return outcome

    def log_attempt(self, op, outcome, request):
        emit = self.recorder.emit  # the attempt's ts: when it was sent
        self.recorder.emit = lambda event, op_id, **fields: emit(  # type: ignore[method-assign]
            event, op_id, **{"ts": self.sent_at, **fields})
        try:
            super().log_attempt(op, outcome, request)
        finally:
            delattr(self.recorder, "emit")


if __name__ == "__main__":
    main(AnswerDeliveredLoggedLost)
