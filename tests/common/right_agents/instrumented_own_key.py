"""Right: the plain-requests agent instrumented by ``harness.instrument``, keeping a key of its own (a uuid
minted once per operation, the same on every retry) instead of ``op.idempotency_key``: the key the agent
sends is the operation's key, and the instrumentation records it (docs/instrument.md: "it decides nothing
for the agent")."""

from __future__ import annotations

import uuid

from harness.agents.instrumented.plain_requests import main

KEYS: dict[str, str] = {}  # operation id -> the agent's own key, stable across its retries

if __name__ == "__main__":
    main(key_for=lambda op: KEYS.setdefault(op.operation_id, str(uuid.uuid4())))
