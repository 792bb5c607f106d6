"""Wrong: polls the status of a 202 against a short deadline and resolves the operation failed when it is still
pending then, though the destination accepted the write and completes it later (a 202 leaves the operation in
doubt; a poll answered "pending" proves nothing happened no more than it proves it did)."""

from harness.agents.reference import main
from harness.agents.wrong.pending_poll_as_done import PendingPollAsDone

DEADLINE_POLLS = 2  # 0.1 s apart: well before the scenario's operation completes


class PendingPollAsFailed(PendingPollAsDone):  # the same poll, read to the opposite wrong conclusion
    def await_async(self, op, outcome):
        ref = outcome.body["operation"]["id"]
        polls = []
        for _ in range(DEADLINE_POLLS):
            obs_id, status = self.poll_once(op, outcome)
            polls.append(obs_id)
            if status == "succeeded":
                return self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id, obs_id],
                                    f"asynchronous operation {ref} succeeded")
        self.resolve(op, "failed", [], [outcome.attempt_id, *polls],
                     f"asynchronous operation {ref} did not complete within the deadline")


if __name__ == "__main__":
    main(PendingPollAsFailed)
