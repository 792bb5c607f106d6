"""Deliberately wrong agents, shipped for tests: each breaks exactly one rule of the articles.

Run one as `python -m harness.agents.wrong.<name>`; `WRONG_AGENTS` maps each name to the flaw.
"""

WRONG_AGENTS = {
    "new_key_per_attempt": "mints a new idempotency key for every attempt and retries a lost response blindly",
    "timeout_as_failed": "logs a lost response as a failed attempt, then retries blindly without a key",
    "idle": "does nothing at all: no operation, no attempt, no resolution",
    "forger": "writes a flawless-looking log without ever calling the destination",
}
