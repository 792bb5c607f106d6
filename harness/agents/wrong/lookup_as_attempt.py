"""Wrong: logs its reconciliation lookups as attempts, as if reading were acting."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class LookupAsAttempt(Agent):
    def lookup(self, op, source="lookup"):
        refs, answered = super().lookup(op, source)
        spec = self.contracts[op["intent"]["destination"]]["lookup"]
        self.recorder.attempt(op["operation_id"], new_id("att"), "response_received",
                              destination=op["intent"]["destination"], method=spec.get("method", "GET"),
                              path=spec["path"], http_status=200, effect_refs=refs or None)
        return refs, answered


if __name__ == "__main__":
    main(LookupAsAttempt)
