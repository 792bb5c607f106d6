"""Wrong: writes its operation event only once the first request has gone out, yet before that attempt's line:
the log's order looks right, but the declaration's time is after the request reached the proxy, and a crash in
between leaves an effect no persisted intent accounts for (H070, the claims table's declared before dispatch)."""

from harness.agents.reference import Agent, main


class DeclaresBetweenSendAndLog(Agent):
    def log_operation(self, op):
        if op.get("attempts") or op.get("declared"):
            super().log_operation(op)
        else:
            op["declare_before_logging"] = True  # held back until the first answer

    def log_attempt(self, op, outcome, request):
        if op.pop("declare_before_logging", False):
            op["declared"] = True
            self.log_operation(op)
        super().log_attempt(op, outcome, request)


if __name__ == "__main__":
    main(DeclaresBetweenSendAndLog)
