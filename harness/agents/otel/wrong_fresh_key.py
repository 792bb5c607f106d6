"""Wrong, on purpose: the trace-only agent minting a fresh idempotency key for every attempt. Its spans carry
the key each request really sent, so the checker reads the key change from the trace (H002, H003) and the
destination's second effect (H016), as it reads them from the audit log of the instrumented twin
(``harness.agents.instrumented.wrong_fresh_key``).

    python -m harness.agents.otel.wrong_fresh_key
"""

from __future__ import annotations

import uuid

from harness.agents.otel.traced import main

if __name__ == "__main__":
    main(key_for=lambda operation_id, attempt: f"key_{uuid.uuid4().hex}")
