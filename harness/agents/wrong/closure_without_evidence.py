"""Wrong: after a lost response it declares success, citing nothing and naming no effect."""

from harness.agents.reference import Agent, main


class ClosureWithoutEvidence(Agent):
    def after_unknown(self, op, reason, outcome):
        self.resolve(op, "succeeded", [], [], "the request was sent, so it probably worked")
        return None


if __name__ == "__main__":
    main(ClosureWithoutEvidence)
