"""Wrong: a lookup the destination did not answer (a 502, a refused connection) is logged and
counted as a negative one, "found: false", although it proves nothing either way."""

from harness.agents.reference import Agent, main


class UnansweredLookupAsNegative(Agent):
    def lookup(self, op, source="lookup"):
        real = self.recorder.observation

        def negative(operation_id, observation_id, **fields):
            if fields.get("found") is None:
                fields.update(found=False, lag_possible=False)
            return real(operation_id, observation_id, **fields)

        self.recorder.observation = negative  # type: ignore[method-assign]
        try:
            refs, _answered = super().lookup(op, source)
        finally:
            del self.recorder.observation
        return refs, True


if __name__ == "__main__":
    main(UnansweredLookupAsNegative)
