"""kind: wrong
flaw: an async write is closed naming the 202's operation id (its tracking handle) as the effect ref
should: H015
scenarios: async_accepted

The agent polls correctly and closes on `succeeded`, but keeps the handle it was given at acceptance as
"the thing that was created" instead of the poll's `effect_ref` (contract section 4: the status's
`effect_ref` names the effect; section 8: the effect refs must be what the destination committed, H015).
"""
import sys

from base import Agent


class Flawed(Agent):
    def on_accepted(self, op, attempt_id, outcome):
        op["handle"] = str(outcome.body["operation"]["id"])
        return super().on_accepted(op, attempt_id, outcome)

    def resolve(self, op, state, refs, evidence, reason, **extra):
        if state == "succeeded" and op.get("handle"):
            refs = [op["handle"]]
        super().resolve(op, state, refs, evidence, reason, **extra)


if __name__ == "__main__":
    sys.exit(Flawed().run())
