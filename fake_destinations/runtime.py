"""What every destination shares at run time: the destination clock, the write counter that
drives declared failures, and the rate-limit window.

The destination clock is wall time plus an offset the harness can advance (its control pipe), so that tests of
key retention, index lag and async completion jump forward instead of sleeping. Ledger timestamps
stay on the real wall clock so that they line up with the proxy journal.
"""

from __future__ import annotations

import hmac
import time
from typing import Any

from fake_destinations.ledger import Ledger
from fake_destinations.services import SERVICES

# The one line the destination process prints on stdout once every port is bound.
READY_PREFIX = "READY "
# what a request past the fault proxy gets, when a gate is set: recorded, refused, nothing done
UNGATED_STATUS = 403
UNGATED_BODY = {"error": "not_through_the_fault_proxy",
                "message": "this destination serves the harness's fault proxy only; send to the address in "
                           "HARNESS_DESTINATION_*"}


class Clock:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.offset = float(ledger.get_meta("clock_offset", "0") or 0)

    def now(self) -> float:
        return time.time() + self.offset

    @staticmethod
    def wall() -> float:
        return time.time()

    def advance(self, seconds: float) -> float:
        self.offset += seconds
        self.ledger.set_meta("clock_offset", repr(self.offset))
        return self.now()

    def reset(self) -> None:
        self.offset = 0.0


class RateLimited(Exception):
    """Raised by ``check_rate_limit`` when the window is full."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class DestinationRuntime:
    def __init__(self, name: str, spec: dict[str, Any], ledger: Ledger, clock: Clock) -> None:
        self.name, self.ledger, self.clock = name, ledger, clock
        # the run's gate (contract.GATE_HEADER): a request that does not carry it did not cross the fault proxy
        self.gate: str | None = None
        self.service = SERVICES[spec["service"]]
        self.configure(spec)
        self.reset()

    def configure(self, spec: dict[str, Any]) -> None:
        """Take another spec of the same service (a pooled process serving a scenario that declares it
        otherwise: another retention, lag, delay or failures), without restarting."""
        if spec["service"] != self.service.name:
            raise ValueError(f"destination {self.name} is a {self.service.name}, not a {spec['service']}")
        self.spec = spec
        self.failures = {f["at"]: f for f in spec.get("failures") or ()}

    def reset(self) -> None:
        self.writes = int(self.ledger.get_meta(f"writes:{self.name}", "0") or 0)
        self.window: list[float] = []

    def past_the_gate(self, value: str | None) -> bool:
        """Whether a request carrying ``value`` as its gate header may be served (always, with no gate set)."""
        return self.gate is None or (value is not None and hmac.compare_digest(value, self.gate))

    def next_failure(self) -> dict[str, Any] | None:
        """Count one side-effecting request; the failure declared for its number, if any."""
        self.writes += 1
        self.ledger.set_meta(f"writes:{self.name}", str(self.writes))
        return self.failures.get(self.writes)

    def check_rate_limit(self) -> None:
        limit = self.spec.get("rate_limit")
        if not limit:
            return
        now = self.clock.now()
        self.window = [t for t in self.window if t > now - limit["per_seconds"]]
        if len(self.window) >= limit["max_requests"]:
            raise RateLimited(limit["retry_after_seconds"])
        self.window.append(now)
