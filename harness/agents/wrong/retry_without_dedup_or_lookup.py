"""Wrong: after a lost response on a destination that neither deduplicates nor offers a lookup,
it retries anyway (logged honestly) instead of escalating."""

from harness.agents.reference import Agent, main


class RetryWithoutDedupOrLookup(Agent):
    def reconcile_then_retry(self, op):
        if self.contracts[op["intent"]["destination"]].get("lookup"):
            return super().reconcile_then_retry(op)
        return False  # no lookup, no dedup: it retries where it must escalate


if __name__ == "__main__":
    main(RetryWithoutDedupOrLookup)
