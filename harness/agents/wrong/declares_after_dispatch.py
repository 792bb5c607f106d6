"""Wrong: writes its operation event after the first request went out, not before: a crash between the two
leaves an effect no persisted intent accounts for (pending operations are persisted before dispatch; the
operation model, H060)."""

from harness.agents.reference import Agent, main


class DeclaresAfterDispatch(Agent):
    def log_operation(self, op):
        if op.get("attempts") or op.get("declared_late"):
            super().log_operation(op)
        else:
            op["declare_after_dispatch"] = True  # held back until the first attempt is logged

    def attempt_logged(self, op, outcome, request):
        super().attempt_logged(op, outcome, request)
        if op.pop("declare_after_dispatch", False):
            op["declared_late"] = True
            self.log_operation(op)


if __name__ == "__main__":
    main(DeclaresAfterDispatch)
