"""Wrong: after a dropped SSH session it asks its session policy "allow the call?", records that
generic approval and reruns the command. For a destructive command the approval must be for the rerun
itself, showing the attempt and its unknown dispatch state; "allow the API call" hides exactly that."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class RerunOnGenericApproval(Agent):
    def reconcile_then_retry(self, op):
        if op["kind"]["method"] != "EXEC":
            return super().reconcile_then_retry(op)
        self.recorder.approval(op["operation_id"], new_id("apr"), approver="session-policy", decision="approved",
                               scope="retry", reason="allow the API call")
        return False  # approved: rerun


if __name__ == "__main__":
    main(RerunOnGenericApproval)
