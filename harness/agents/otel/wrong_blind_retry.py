"""Wrong, on purpose: the trace-only agent retrying every failed request at once, with the same key but without
looking first or asking whether the destination deduplicates: on a destination without dedup a lost response
becomes a second effect (H010, H016), judged from its spans.

    python -m harness.agents.otel.wrong_blind_retry
"""

from __future__ import annotations

from harness.agents.otel.traced import main

if __name__ == "__main__":
    main(blind_retry=True)
