"""Right: an agent with an operator to ask. After a dropped SSH session on a command that needs a human
decision (append, financial, destructive, notification), the operator approves that very rerun (scope
retry, naming the attempt and its dispatch state, docs/contract.md section 7); the agent reruns once and
closes succeeded on the rerun's receipt, citing the approval: the second effect is the one the operator
asked for (section 8, "An approved rerun")."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id

NEEDS_A_HUMAN = ("append", "financial", "destructive", "notification")


class ApprovedRerun(Agent):
    def reconcile_then_retry(self, op):
        if op["kind"]["method"] != "EXEC" or op["kind"].get("family") not in NEEDS_A_HUMAN:
            return super().reconcile_then_retry(op)
        approval_id = new_id("apr")
        self.recorder.approval(op["operation_id"], approval_id, approver="oncall", decision="approved",
                               scope="retry", retry_of_attempt_id=op["attempts"][-1],
                               prior_dispatch_state="sent_no_response",
                               recovery=f"rerun {self.command(op)} once: the first run may have acted",
                               reason="the service must come back with the new configuration")
        op["approval_id"] = approval_id
        self.save()
        return False  # approved: rerun

    def next_step(self, op, outcome):
        if op.get("approval_id") and outcome.exit_status == 0:
            self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id, op["approval_id"]],
                         "the approved rerun exited 0; the first run's effect, if any, was accepted by the approver")
            return None
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(ApprovedRerun)
