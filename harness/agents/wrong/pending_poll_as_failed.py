"""Wrong: polls the status of a 202 against a short deadline and resolves the operation failed when it is still
pending then, though the destination accepted the write and completes it later (a 202 leaves the operation in
doubt; a poll answered "pending" proves nothing happened no more than it proves it did)."""

import time

import requests

from harness.agents.reference import CONNECT_TIMEOUT, READ_TIMEOUT, Agent, main
from harness.recorder import new_id

DEADLINE_POLLS = 2  # 0.1 s apart: well before the scenario's operation completes


class PendingPollAsFailed(Agent):
    def await_async(self, op, outcome):
        destination = op["intent"]["destination"]
        ref = outcome.body["operation"]
        path = ref.get("status_url") or self.contracts[destination]["status"]["path"].format(id=ref["id"])
        polls = []
        for _ in range(DEADLINE_POLLS):
            time.sleep(0.1)
            obs_id = new_id("obs")
            try:
                response = requests.get(self.url(destination, path), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                                        headers={"Connection": "close", **self.auth(destination)})
                status = response.json().get("status") if response.ok else None
            except (requests.RequestException, ValueError):
                status = None
            op["observations"].append(obs_id)
            polls.append(obs_id)
            self.save()
            self.recorder.observation(op["operation_id"], obs_id, source="status_poll", method="GET", path=path,
                                      found=status == "succeeded", effect_refs=[],
                                      detail=f"operation {ref['id']} is {status or 'unreadable'}")
            if status == "succeeded":
                return self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id, obs_id],
                                    f"asynchronous operation {ref['id']} succeeded")
        self.resolve(op, "failed", [], [outcome.attempt_id, *polls],
                     f"asynchronous operation {ref['id']} did not complete within the deadline")


if __name__ == "__main__":
    main(PendingPollAsFailed)
