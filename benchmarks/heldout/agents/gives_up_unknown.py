"""Held-out correct agent, style "give up early": two attempts at most, then `unknown` for a person.
kind: correct
transport: http, mcp, ssh

Written from docs/contract.md alone (section 7: the attempt budget is the agent's own; once it is spent,
resolve failed only if no attempt could have acted, else unknown). It never retries a doubtful write on the
key alone: it looks first where it can, and takes the key's word only where there is nothing to look at.
"""
import sys

from base import Agent


class GivesUp(Agent):
    MAX_ATTEMPTS = 2

    def budget_spent(self, op):
        attempts_could_act = op.get("could_act", True)
        self.resolve(op, "failed" if not attempts_could_act else "unknown", [], list(op["attempts"]),
                     "gave up after 2 attempts: an operator decides")


if __name__ == "__main__":
    sys.exit(GivesUp().run())
