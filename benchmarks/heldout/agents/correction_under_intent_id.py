"""kind: wrong
flaw: the correction operation is declared under the duplicated intent's intent_id
should: H001
scenarios: reconciliation_duplicate

The correction is "for" the intent, so the agent tags it with the intent id: a second operation id for the
same intent (contract section 8: the correction has no intent_id; under the first intent's id it would be a
second operation id for that intent, H001).
"""
import sys

from base import Agent, new_id


class Flawed(Agent):
    def duplicate(self, op, refs, obs_id):
        correction = new_id("op")
        self.emit("operation", correction, intent_id=op["intent"]["intent_id"],
                  intent={"kind": "compensate_duplicate", "destination": op["intent"]["destination"],
                          "params": {"effect_refs": refs[1:]}},
                  correction_of_operation_id=op["operation_id"], owner="operator", state="open")
        self.resolve(op, "duplicate_effect_confirmed", refs, [obs_id], "reconciliation found several records",
                     correction_operation_id=correction)


if __name__ == "__main__":
    sys.exit(Flawed().run())
