"""Right: after a dropped SSH session, a set_state command that declares its convergence
(``convergence_exit_status``: create-user exits 9 when the user exists) is rerun, and the converging exit
closes the operation succeeded on its receipt (docs/contract.md section 4, "Command families")."""

from harness.agents.reference import Agent, main


class ConvergenceRerun(Agent):
    def reconcile_then_retry(self, op):
        if op["kind"].get("family") == "set_state" and op["kind"].get("convergence_exit_status") is not None:
            return False  # the rerun converges: it acts only if the first run did not
        return super().reconcile_then_retry(op)

    def next_step(self, op, outcome):
        if outcome.exit_status is not None and outcome.exit_status == op["kind"].get("convergence_exit_status"):
            self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id],
                         f"the command exited {outcome.exit_status}: the state already holds")
            return None
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(ConvergenceRerun)
