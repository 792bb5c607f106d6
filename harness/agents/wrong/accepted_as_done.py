"""Wrong: takes 202 Accepted for done. It closes the operation succeeded on the 202 itself, naming the
record the answer announces, without polling the status endpoint (the destination holds the record
from accept time, so only the closure's evidence can show that nothing proved completion)."""

from harness.agents.reference import Agent, main


class AcceptedAsDone(Agent):
    def await_async(self, op, outcome):
        self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id],
                     "the destination accepted the deployment")


if __name__ == "__main__":
    main(AcceptedAsDone)
