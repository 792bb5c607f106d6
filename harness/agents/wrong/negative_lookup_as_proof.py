"""Wrong: one negative lookup right after a lost response is taken as proof that nothing happened,
and the operation is closed as failed, although the search index may simply lag."""

from harness.agents.reference import Agent, main


class NegativeLookupAsProof(Agent):
    def reconcile_then_retry(self, op):
        if not self.contracts[op["intent"]["destination"]].get("lookup"):
            return super().reconcile_then_retry(op)
        found, _ = self.lookup(op)
        if found:
            self.resolve(op, "succeeded", found, [op["observations"][-1]], "lookup found the effect")
        else:
            self.resolve(op, "failed", [], [op["observations"][-1]], "lookup found nothing: it did not happen")
        return True


if __name__ == "__main__":
    main(NegativeLookupAsProof)
