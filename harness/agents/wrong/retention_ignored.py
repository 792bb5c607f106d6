"""Wrong: trusts a documented idempotency key forever. After a lost response it retries with the
same key without checking the key's retention window, so a retry after the window has passed is a
second charge (the agent's own timestamps, written when each attempt finished, even look close)."""

from harness.agents.reference import Agent, main


class RetentionIgnored(Agent):
    def dedup_in_force(self, op):
        idem = self.contracts[op["intent"]["destination"]].get("idempotency") or {}
        return idem.get("style", "none") != "none" and bool(op.get("idempotency_key"))


if __name__ == "__main__":
    main(RetentionIgnored)
