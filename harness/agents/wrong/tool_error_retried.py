"""Wrong: an MCP error result (`isError: true`) is taken as "the tool did nothing" and the call is retried
at once, never looked up; the tool had committed before it answered the error, so the retry commits again
(H010; its read-back then finds both orders and closes duplicate_effect_confirmed, which the scenario's
expectation of one order fails, X001)."""

from harness.agents.reference import Agent, main


class ToolErrorRetried(Agent):
    def after_tool_error(self, op, outcome):
        return self.retry_if_budget(op, "destination_5xx", outcome)


if __name__ == "__main__":
    main(ToolErrorRetried)
