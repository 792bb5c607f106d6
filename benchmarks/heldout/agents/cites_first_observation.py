"""kind: wrong
flaw: a succeeded resolution cites the operation's first observation, not the one that found the effect
should: H025
scenarios: lookup_unavailable, lookup_lag

`evidence=[observations[0]]`: after 502s or lagging negatives the first observation found nothing
(contract section 8: one cited id must prove a succeeded state, an observation with found true, H025).
"""
import sys

from base import Agent


class Flawed(Agent):
    def resolve(self, op, state, refs, evidence, reason, **extra):
        if state == "succeeded" and op.get("observations"):
            evidence = [op["observations"][0]]
        super().resolve(op, state, refs, evidence, reason, **extra)


if __name__ == "__main__":
    sys.exit(Flawed().run())
