"""kind: wrong
flaw: the operation of a corrected payload is declared as an unrelated new operation (no supersedes_operation_id)
should: H012
scenarios: payload_changed

The agent handles `supersedes` in its queue but never writes the link into the audit log (contract
section 8: open a new operation with supersedes_operation_id set to the superseded operation, H012).
"""
import sys

from base import Agent


class Flawed(Agent):
    def declare(self, op, superseded):
        super().declare(op, None)


if __name__ == "__main__":
    sys.exit(Flawed().run())
