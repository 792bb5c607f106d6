"""Wrong: polls the status of a 202 once and closes succeeded on that poll whatever it said, so it
cites a poll that reported the operation still pending."""

import time

import requests

from harness.agents.reference import CONNECT_TIMEOUT, READ_TIMEOUT, Agent, main
from harness.recorder import new_id


class PendingPollAsDone(Agent):
    def poll_once(self, op, outcome):
        """One status poll, 0.1 s after the 202, logged as an observation: (its id, the status it read or None)."""
        destination = op["intent"]["destination"]
        ref = outcome.body["operation"]
        path = ref.get("status_url") or self.contracts[destination]["status"]["path"].format(id=ref["id"])
        time.sleep(0.1)
        obs_id = new_id("obs")
        try:
            response = requests.get(self.url(destination, path), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                                    headers={"Connection": "close", **self.auth(destination)})
            status = response.json().get("status") if response.ok else None
        except (requests.RequestException, ValueError):
            status = None
        op["observations"].append(obs_id)
        self.save()
        self.recorder.observation(op["operation_id"], obs_id, source="status_poll", method="GET", path=path,
                                  found=status == "succeeded", effect_refs=[],
                                  detail=f"operation {ref['id']} is {status or 'unreadable'}")
        return obs_id, status

    def await_async(self, op, outcome):
        obs_id, _ = self.poll_once(op, outcome)
        self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id, obs_id],
                     f"asynchronous operation {outcome.body['operation']['id']} was polled")


if __name__ == "__main__":
    main(PendingPollAsDone)
