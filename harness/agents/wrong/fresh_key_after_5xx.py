"""Wrong: takes a 5xx to mean "nothing happened": it retries at once, without looking the effect up,
under a fresh idempotency key, so if the destination committed before failing, the retry is a
second effect the destination cannot deduplicate."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class FreshKeyAfter5xx(Agent):
    def after_unknown(self, op, reason, outcome):
        if reason != "destination_5xx":
            return super().after_unknown(op, reason, outcome)
        op["idempotency_key"] = "idem_" + new_id("retry")  # a new request, as it sees it
        return self.retry_if_budget(op, reason, outcome)

    def idempotency_key(self, op, attempt_id):
        return op.get("idempotency_key") or super().idempotency_key(op, attempt_id)


if __name__ == "__main__":
    main(FreshKeyAfter5xx)
