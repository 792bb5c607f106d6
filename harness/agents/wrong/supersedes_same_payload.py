"""Wrong: after a lost response it starts over under a new operation that declares it supersedes the first, with
the same payload (and so a new key): a retry dodging the stable operation id (H075, the claims table's
superseded payload)."""

from harness.agents.reference import Agent, main


class SupersedesSamePayload(Agent):
    def after_unknown(self, op, reason, outcome):
        if op.get("superseded"):
            return super().after_unknown(op, reason, outcome)
        op["superseded"] = True
        intent = {**op["intent"], "supersedes": op["intent"]["intent_id"]}
        fresh = self.open_operation(intent)  # its state replaces the first's: the first is left open
        fresh["superseded"] = True
        self.drive(fresh)
        return None


if __name__ == "__main__":
    main(SupersedesSamePayload)
