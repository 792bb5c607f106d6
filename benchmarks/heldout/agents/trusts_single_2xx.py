"""kind: wrong
flaw: a 2xx from a destination that does not deduplicate is taken as proof of exactly one effect (no read-back)
should: H016
scenarios: reconciliation_duplicate

The agent closes on the 201 it got. The network delivered the request twice; the second delivery made a
second webhook (contract section 8: a success does not prove a single effect where nothing deduplicates:
read back; two records are duplicate_effect_confirmed, H016).
"""
import sys

from base import Agent


class Flawed(Agent):
    def on_success(self, op, attempt_id, outcome, refs):
        self.resolve(op, "succeeded", refs, [attempt_id], f"the destination answered {outcome.status}")


if __name__ == "__main__":
    sys.exit(Flawed().run())
