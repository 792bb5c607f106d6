"""Wrong: an intent that a later intent of the batch supersedes is resolved cancelled as soon as its write is in
doubt ("the correction replaces it"), without reconciling: the first write may have acted (H006, which holds a
cancelled resolution to the same proof as a failed one)."""

from harness.agents.reference import Agent, main


class SupersededCancelled(Agent):
    def after_unknown(self, op, reason, outcome):
        if any(i.get("supersedes") == op["intent"]["intent_id"] for i in self.intents):
            self.resolve(op, "cancelled", [], list(op["attempts"]), "superseded by a corrected intent")
            return None
        return super().after_unknown(op, reason, outcome)


if __name__ == "__main__":
    main(SupersededCancelled)
