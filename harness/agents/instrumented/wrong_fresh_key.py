"""Wrong, on purpose: the plain-requests agent, instrumented the same way, but minting a fresh idempotency
key for every attempt. The instrumentation logs the key each request really carried, so the checker sees
the key change (H002, H003) and the destination's second effect (H016): instrumenting does not make an
agent pass.

    python -m harness.agents.instrumented.wrong_fresh_key
"""

from __future__ import annotations

import uuid

from harness.agents.instrumented.plain_requests import main

if __name__ == "__main__":
    main(key_for=lambda op: f"key_{uuid.uuid4().hex}")
