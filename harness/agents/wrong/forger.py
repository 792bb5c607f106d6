"""Wrong: writes the log a perfect agent would write, without ever calling the destination.

Its effect references are invented; only the proxy journal and the ledger can expose it.
"""

from harness.agents.reference import Agent, Outcome, main
from harness.recorder import new_id


class Forger(Agent):
    def send(self, attempt_id, request, op):
        ref = new_id(op["kind"].get("effect_ref_field", "id"))
        return Outcome(attempt_id, "response_received", 201, {op["kind"].get("effect_ref_field", "id"): ref})


if __name__ == "__main__":
    main(Forger)
