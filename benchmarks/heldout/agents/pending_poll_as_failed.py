"""kind: wrong
flaw: an async operation still pending after a short polling deadline is resolved failed
should: H006
scenarios: async_accepted

A deadline of 0.2 s on the status poll: "not done in time" becomes failed. The destination accepted the
write and completes it later (contract section 8: a 202 proves acceptance; operation model: a 202 leaves
the operation in doubt; never failed while a write may have acted, H006).
"""
import sys
import time

from base import Agent, new_id


class Flawed(Agent):
    def on_accepted(self, op, attempt_id, outcome):
        status_url = outcome.body["operation"]["status_url"]
        for _ in range(2):
            time.sleep(0.1)
            obs_id = new_id("obs")
            status = self.http(op, "GET", status_url).json()
            done = status.get("status") == "succeeded"
            self.emit("observation", op["operation_id"], observation_id=obs_id, source="status_poll", method="GET",
                      path=status_url, found=done, effect_refs=[str(status["effect_ref"])] if done else [])
            if done:
                return self.resolve(op, "succeeded", [str(status["effect_ref"])], [attempt_id, obs_id], "done")
        return self.resolve(op, "failed", [], [attempt_id], "did not complete within the deadline")


if __name__ == "__main__":
    sys.exit(Flawed().run())
