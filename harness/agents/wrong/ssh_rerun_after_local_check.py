"""Wrong: treats shell commands as "usually safe": after a dropped SSH session it checks its own
local record of what it installed, finds nothing, and reruns the command. An append command then
acts twice; a local cache proves nothing about the host."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class SshRerunAfterLocalCheck(Agent):
    def reconcile_then_retry(self, op):
        if op["kind"]["method"] != "EXEC":
            return super().reconcile_then_retry(op)
        obs_id = new_id("obs")
        op["observations"].append(obs_id)
        self.save()
        self.recorder.observation(op["operation_id"], obs_id, source="lookup", found=False, lag_possible=False,
                                  detail="the agent's local record of installed keys has no entry")
        return False  # "not there": rerun


if __name__ == "__main__":
    main(SshRerunAfterLocalCheck)
