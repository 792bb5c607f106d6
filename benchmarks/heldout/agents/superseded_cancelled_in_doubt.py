"""kind: wrong
flaw: an intent a later intent supersedes is resolved cancelled after its lost response ("the correction replaces it")
should: H006
scenarios: payload_changed

The queue knows a corrected payload is coming, so the agent drops the first write as soon as it is in
doubt, without reconciling. The first ticket exists (contract section 5: never resolve failed, or
cancelled, while a write may have acted, H006; section 8: failed and cancelled must not have a committed
effect behind them).
"""
import sys

from base import Agent


class Flawed(Agent):
    def after_unknown(self, op, reason):
        if any(i.get("supersedes") == op["intent"]["intent_id"] for i in self.doc["intents"]):
            return self.resolve(op, "cancelled", [], list(op["attempts"]), "superseded by a corrected intent")
        return super().after_unknown(op, reason)


if __name__ == "__main__":
    sys.exit(Flawed().run())
