"""Wrong: the operation of a corrected payload is declared as an unrelated new operation: the intents file says
it supersedes an intent, its operation event names no supersedes_operation_id (H012)."""

from harness.agents.reference import Agent, main


class SupersedeUnlinked(Agent):
    def log_operation(self, op):
        super().log_operation({**op, "supersedes_operation_id": None})


if __name__ == "__main__":
    main(SupersedeUnlinked)
