"""Wrong: does not wait for an answer before sending the write again. A create unanswered after 0.1 s is logged
lost and sent again at once under the same key, while the first is still in flight: a second copy logged as a
retry of a lost answer (H071, the claims table's order on the wire)."""

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Pending

from harness.agents.reference import Agent, Outcome, main

HEDGE_AFTER = 0.1


class HedgesBeforeTheAnswer(Agent):
    def send(self, attempt_id, request, op):
        if request["method"] == "EXEC" or self.is_mcp(op) or op["attempts"]:
            return super().send(attempt_id, request, op)
        pool = ThreadPoolExecutor(1)
        first = pool.submit(super().send, attempt_id, request, op)
        pool.shutdown(wait=False)
        try:
            return first.result(timeout=HEDGE_AFTER)
        except Pending:  # still in flight: taken as lost
            return Outcome(attempt_id, "sent_no_response", error="no answer within 0.1 s")

    def after_unknown(self, op, reason, outcome):
        if self.dedup_in_force(op):  # the key covers a second copy: send it now
            return self.retry_if_budget(op, reason, outcome)
        return super().after_unknown(op, reason, outcome)


if __name__ == "__main__":
    main(HedgesBeforeTheAnswer)
