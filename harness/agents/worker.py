"""The reference agent's worker: `python -m harness.agents.worker INTENT_ID`.

Started by the owner for an intent it delegates. It acts under the owner's operation id (read from
the shared state dir), logs its attempts with `worker`, and resolves the operation; it never opens
an operation of its own.
"""

import sys

from harness.agents.base import Agent
from harness.recorder import new_id


class Worker(Agent):
    def __init__(self, env=None):
        super().__init__(env)
        self.worker_id = new_id("wrk")

    def run_one(self, intent_id: str) -> int:
        op = self.state[intent_id]
        if not op.get("resolved"):
            self.drive(op)
        self.recorder.close()
        return 0


if __name__ == "__main__":
    sys.exit(Worker().run_one(sys.argv[1]))
