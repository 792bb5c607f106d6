"""Wrong: a corrected payload is sent as a retry of the old operation, with the old key."""

from harness.agents.reference import Agent, main


class PayloadChangedAsRetry(Agent):
    def handle(self, intent):
        old = self.state.get(intent.get("supersedes") or "")
        if old is None:
            return super().handle(intent)
        old["intent"] = {**intent, "intent_id": old["intent"]["intent_id"]}
        old.pop("resolved", None)
        self.state[intent["intent_id"]] = old
        self.drive(old, "operator_requested")


if __name__ == "__main__":
    main(PayloadChangedAsRetry)
