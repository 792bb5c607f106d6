"""Wrong: takes every SSH command to converge, as create-user does ("a rerun that finds the work done does
nothing"): after a dropped session it reruns the command. An append command (install-key) has no
convergence in its contract and acts again: a second key (H010, H035)."""

from harness.agents.reference import Agent, main


class AssumesConvergence(Agent):
    def reconcile_then_retry(self, op):
        if op["kind"]["method"] != "EXEC":
            return super().reconcile_then_retry(op)
        return False  # "it converges": rerun


if __name__ == "__main__":
    main(AssumesConvergence)
