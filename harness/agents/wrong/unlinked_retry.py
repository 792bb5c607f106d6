"""Wrong: logs each retry as a fresh attempt, with no link to the attempt it repeats, no reason
from the vocabulary and no remaining budget: the log cannot say why a second request happened."""

from harness.agents.reference import Agent, main


class UnlinkedRetry(Agent):
    def log_attempt(self, op, outcome, request):
        self.recorder.attempt(op["operation_id"], outcome.attempt_id, outcome.dispatch_state,
                              destination=op["intent"]["destination"], method=request["method"],
                              path=request["path"], idempotency_key=request["key"],
                              http_status=outcome.status, effect_refs=self.effect_refs(op, outcome.body) or None)
        self.attempt_logged(op, outcome, request)


if __name__ == "__main__":
    main(UnlinkedRetry)
