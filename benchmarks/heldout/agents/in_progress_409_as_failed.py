"""kind: wrong
flaw: a 409 (key in use: the first request still processing) is taken as a final refusal: resolved failed
should: H006
scenarios: probe_in_progress_409

After a read timeout the agent retries at once with the same key (the destination deduplicates, within
retention: justified). The destination answers 409 idempotency_key_in_use because the first request is still
being processed; the agent's HTTP error handling treats any 4xx as "refused" and resolves failed, and the
first request then commits (contract section 4: 409 key in use; operation model: a 409 leaves it in doubt;
H006 never failed while a write may have acted).
"""
import sys

from base import Agent


class Flawed(Agent):
    def after_unknown(self, op, reason):
        if self.dedup_in_force(op):  # the key makes the retry safe: no need to look first
            return reason, "retry: the destination deduplicates this key and it is within retention"
        return super().after_unknown(op, reason)

    def on_in_progress(self, op, attempt_id):
        return self.resolve(op, "failed", [], [attempt_id], "the destination refused: 409")


if __name__ == "__main__":
    sys.exit(Flawed().run())
