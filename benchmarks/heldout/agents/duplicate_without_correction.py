"""kind: wrong
flaw: a confirmed duplicate is resolved with no correction operation (nobody is asked to compensate)
should: H016
scenarios: reconciliation_duplicate

(contract section 8: resolve duplicate_effect_confirmed with correction_operation_id, and log the
correction as a new operation, H016.)
"""
import sys

from base import Agent


class Flawed(Agent):
    def duplicate(self, op, refs, obs_id):
        self.resolve(op, "duplicate_effect_confirmed", refs, [obs_id], "reconciliation found several records")


if __name__ == "__main__":
    sys.exit(Flawed().run())
