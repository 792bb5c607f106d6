"""kind: wrong
flaw: a confirmed duplicate is resolved naming only the first effect (the others only in the correction)
should: H016, H015
scenarios: reconciliation_duplicate

The agent reads back, finds two deliveries, opens the correction, but its resolution lists just the
"original" (contract section 8: resolve duplicate_effect_confirmed naming all the refs, H016).
"""
import sys

from base import Agent, new_id


class Flawed(Agent):
    def duplicate(self, op, refs, obs_id):
        correction = new_id("op")
        self.emit("operation", correction, intent={"kind": "compensate_duplicate",
                                                   "destination": op["intent"]["destination"],
                                                   "params": {"effect_refs": refs[1:]}},
                  correction_of_operation_id=op["operation_id"], owner="operator", state="open")
        self.resolve(op, "duplicate_effect_confirmed", refs[:1], [obs_id], "the original; see the correction",
                     correction_operation_id=correction)


if __name__ == "__main__":
    sys.exit(Flawed().run())
