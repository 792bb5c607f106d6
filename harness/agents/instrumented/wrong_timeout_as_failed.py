"""Wrong, on purpose: the plain-requests agent, instrumented the same way, but resolving an operation
``failed`` when its request timed out or lost its answer ("the request failed"). The instrumentation writes
the resolution the agent asked for and logs the attempt as it was (``sent_no_response``), so the checker
sees a failed operation whose effect may exist (H006).

    python -m harness.agents.instrumented.wrong_timeout_as_failed
"""

from __future__ import annotations

from harness.agents.instrumented.plain_requests import main

if __name__ == "__main__":
    main(timeout_is_failure=True)
