"""Wrong: writes its resolution before the observation it cites. It looks the effect up, decides, and
logs the closure first; the lookup it relied on reaches the log (and gets its timestamp) only after."""

from typing import Any

from harness.agents.reference import Agent, main


class ResolutionBeforeObservation(Agent):
    held: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def lookup(self, op, source="lookup"):
        held = []

        def hold(*args, **kwargs):  # kept back...
            held.append((args, kwargs))
            return {}

        self.recorder.observation = hold  # type: ignore[method-assign]
        try:
            return super().lookup(op, source)
        finally:
            del self.recorder.observation
            self.held = [*self.held, *held]

    def resolve(self, op, state, refs, evidence, reason, **fields):
        super().resolve(op, state, refs, evidence, reason, **fields)
        held, self.held = self.held, []
        for args, kwargs in held:  # ...and logged once the closure is written
            self.recorder.observation(*args, **kwargs)


if __name__ == "__main__":
    main(ResolutionBeforeObservation)
