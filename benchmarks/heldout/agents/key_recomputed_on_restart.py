"""kind: wrong
flaw: the idempotency key is hash(operation id, process instance id), recomputed when the state is loaded
should: H002, H073
scenarios: crash_after_dispatch

The operation id survives the restart; the key is "derived" and not persisted, from the operation id and
the client instance's id. The restarted agent logs the interrupted attempt with the key it now computes,
not the one that went on the wire (contract section 6: the same key on every attempt, equal to the one the
operation event declares, H002; the key logged is the key the destination read, H073).
"""
import hashlib
import sys

from base import Agent


class Flawed(Agent):
    def derive_key(self, op):
        return "idem_" + hashlib.sha256((op["operation_id"] + self.session).encode()).hexdigest()[:24]

    def handle(self, intent):
        op = self.state.get(intent["intent_id"])
        if op and not op["resolved"]:
            op["key"] = self.derive_key(op)
            self.build_request(op)
            if op.get("pending"):
                op["pending"]["key"] = op["key"]
        return super().handle(intent)


if __name__ == "__main__":
    sys.exit(Flawed().run())
