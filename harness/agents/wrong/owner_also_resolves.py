"""Wrong: the owner closes an operation it handed to a worker, after the worker closed it: two processes decide
one operation (H020, the claims table's one decider)."""

from harness.agents.reference import Agent, main


class OwnerAlsoResolves(Agent):
    def delegate(self, op):
        super().delegate(op)
        done = self.state[op["intent"]["intent_id"]]
        if done.get("resolved") and done["resolved"] != "unknown":
            refs = self.effect_refs(done, (done.get("last_outcome") or {}).get("body"))
            self.resolve(done, done["resolved"], refs, list(done["attempts"]), "the worker reported back")


if __name__ == "__main__":
    main(OwnerAlsoResolves)
