"""Wrong: retries a tool call after a lost result because the server's tools/list says the tool is
`idempotentHint: true` (or `readOnlyHint: true`), with no lookup and no key the contract honours.

An annotation is a hint from a server that may be wrong or untrusted: on a tool that does not deduplicate,
the retry commits a second effect (H010, H016; H050 names the contradicted hint).
"""

from harness.agents.reference import Agent, main

HINTS = ("idempotentHint", "readOnlyHint")


def hinted(op):
    annotations = op["kind"].get("annotations") or {}
    return next((hint for hint in HINTS if annotations.get(hint) is True), None)


class TrustsIdempotentHint(Agent):
    def reconcile_then_retry(self, op):
        if hinted(op):
            return False  # "the server says it is idempotent": retry at once, nothing looked up
        return super().reconcile_then_retry(op)

    def after_tool_error(self, op, outcome):
        if hinted(op):
            return self.retry_if_budget(op, "destination_5xx", outcome)
        return super().after_tool_error(op, outcome)

    def retry_justification(self, op, reason):
        return hinted(op)


if __name__ == "__main__":
    main(TrustsIdempotentHint)
