"""Wrong: closes an operation on its reconciliation lookup even when a retry came after it, so the
resolution rests on evidence older than the state it is cited to prove (the lookup saw the world
before the retry was dispatched)."""

from harness.agents.reference import Agent, main


class StaleEvidence(Agent):
    def resolve(self, op, state, refs, evidence, reason, **fields):
        if state == "succeeded" and op["observations"]:
            evidence = [op["observations"][0]]  # the first lookup, whatever was dispatched after it
        super().resolve(op, state, refs, evidence, reason, **fields)


if __name__ == "__main__":
    main(StaleEvidence)
