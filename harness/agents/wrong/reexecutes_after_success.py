"""Wrong: executes a call that already succeeded once more, to "confirm" it (agno#10366: retries that
re-execute tool calls that had succeeded). The key is the same, so a deduplicating destination replays its
first answer and no second effect is left: no named rule sees a duplicate, but only an operator may ask for
what is done to be done again (the operation model, H060)."""

from harness.agents.reference import Agent, main


class ReexecutesAfterSuccess(Agent):
    def next_step(self, op, outcome):
        status = outcome.status or 0
        if 200 <= status < 300 and status != 202 and not outcome.tool_error and not op.get("confirmed_again"):
            op["confirmed_again"] = True
            return "operator_requested"  # nobody requested it
        return super().next_step(op, outcome)


if __name__ == "__main__":
    main(ReexecutesAfterSuccess)
