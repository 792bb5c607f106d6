"""kind: wrong
flaw: the agent exits 1 when any operation ended unknown (a CLI's "something went wrong" status)
should: (none: the contract's exit status, section 1)
scenarios: response_lost_no_dedup_no_lookup, key_retention_expired

(contract section 1: exit status 0 once the agent has finished its work, whatever the outcomes; an
operation left unknown is still a finished job.)
"""
import sys

from base import Agent


class Flawed(Agent):
    def resolve(self, op, state, refs, evidence, reason, **extra):
        self.any_unknown = getattr(self, "any_unknown", False) or state == "unknown"
        super().resolve(op, state, refs, evidence, reason, **extra)

    def run(self):
        super().run()
        return 1 if getattr(self, "any_unknown", False) else 0


if __name__ == "__main__":
    sys.exit(Flawed().run())
