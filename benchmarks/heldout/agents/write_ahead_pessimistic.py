"""kind: wrong
flaw: write-ahead log: each attempt is logged sent_no_response before it is sent, then logged again with its outcome
should: H060
scenarios: rate_limited, two_intents_one_run

A team makes the log crash-safe by writing the pessimistic state first. But the attempt's history is then
rewritten: sent_no_response may only be logged again as sent_no_response (contract section 5, the
operation model: an attempt logged sent_no_response may be logged again only as sent_no_response; history
is appended, never rewritten; a write-ahead record is not_sent).
"""
import sys

from base import Agent, fingerprint


class Flawed(Agent):
    def send(self, op, attempt):
        self.emit("attempt", op["operation_id"], ts=attempt["sent_at"], attempt_id=attempt["attempt_id"],
                  destination=op["intent"]["destination"], method=self.kind(op)["method"], path=op["path"],
                  idempotency_key=attempt["key"], request_fingerprint=fingerprint(op["body"]),
                  dispatch_state="sent_no_response", traceparent=attempt["traceparent"],
                  retry_of_attempt_id=op["attempts"][-1] if op["attempts"] else None,
                  retry_reason=attempt["reason"] if op["attempts"] else None,
                  attempt_budget_remaining=self.MAX_ATTEMPTS - len(op["attempts"]) - 1)
        return super().send(op, attempt)


if __name__ == "__main__":
    sys.exit(Flawed().run())
