"""Wrong: logs a read after write it never makes. Every 2xx is "confirmed" by an observation (read_after_write,
found, the answer's effect ref) written from the answer itself, and the closure cites it: evidence with no read
of it on the wire (H072, the claims table's observations)."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class ConfirmsWithoutReading(Agent):
    def resolve(self, op, state, refs, evidence, reason, **fields):
        if state == "succeeded" and refs and not op.get("observations"):
            obs_id = new_id("obs")
            path = op["kind"]["path"].format(**op["intent"].get("params", {}))
            self.recorder.observation(op["operation_id"], obs_id, source="read_after_write", method="GET",
                                      path=f"{path}/{refs[0]}", found=True, effect_refs=refs)
            op["observations"].append(obs_id)
            evidence = [*evidence, obs_id]
        super().resolve(op, state, refs, evidence, reason, **fields)


if __name__ == "__main__":
    main(ConfirmsWithoutReading)
