"""kind: wrong
flaw: after an operation that went through doubt, the agent pauses its queue and exits 0, leaving later intents untouched
should: H021
scenarios: two_intents_one_run

"Stop the line after an incident": a queue consumer that stops taking work once one write needed
reconciliation, and exits as if done (contract section 1: exit 0 once the agent has finished its work;
section 5: every intent needs an operation naming it and a resolution, H021).
"""
import sys

from base import Agent


class Flawed(Agent):
    def after_unknown(self, op, reason):
        self.paused = True
        return super().after_unknown(op, reason)

    def run(self):
        self.paused = False
        for intent in self.doc["intents"]:
            if self.paused:
                break
            self.handle(intent)
        return 0


if __name__ == "__main__":
    sys.exit(Flawed().run())
