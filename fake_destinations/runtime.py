"""What every destination shares at run time: the destination clock, the write counter that
drives declared failures, the rate-limit window, and the idempotent commit's keys (a stored answer replayed, a
key in use, a key reused with another payload; the writes in progress), whatever the destination speaks.

The destination clock is wall time plus an offset the harness can advance (its control pipe), so that tests of
key retention, index lag and async completion jump forward instead of sleeping. Ledger timestamps
stay on the real wall clock so that they line up with the proxy journal.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
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


class KeyInUse(Exception):
    """Raised by ``stored_answer`` while the first write with the key is still being processed."""


class KeyReused(Exception):
    """Raised by ``stored_answer`` when the key was first used with another payload (``first``: its fingerprint)."""

    def __init__(self, first: str | None) -> None:
        super().__init__(first)
        self.first = first


NO_KEY = "(no key)"  # how ``in_flight`` counts the writes that carry no key


class DestinationRuntime:
    def __init__(self, name: str, spec: dict[str, Any], ledger: Ledger, clock: Clock) -> None:
        self.name, self.ledger, self.clock = name, ledger, clock
        # writes being processed, by scoped key (NO_KEY for the keyless): the harness asks at the end of a run, so
        # that a late commit never lands in the next scenario's ledger
        self.in_flight: Counter[str] = Counter()
        # the run's gate (contract.GATE_HEADER): a request that does not carry it did not cross the fault proxy
        self.gate: str | None = None
        # the run's agent containers (their ids, control command agent_containers): whose processes' requests past
        # the proxy are the agent's, though they do not descend from the harness (fake_destinations.peer)
        self.agent_containers: tuple[str, ...] = ()
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

    def stored_answer(self, scoped: str, payload_fingerprint: str | None, *, same_payload: bool = True,
                      expired: Callable[[float], bool] | None = None) -> sqlite3.Row | None:
        """What the ledger keeps of a write's key, to replay (its status, body, effect ref); None for a new key, or
        one ``expired`` (given when it was first used) forgets. ``KeyInUse`` while the first write with it is being
        processed, whatever the retention; ``KeyReused`` when ``same_payload`` and it came with another payload."""
        stored = self.ledger.get_key(self.name, scoped)
        if stored is not None and expired is not None and stored["state"] != "in_progress" \
                and expired(stored["created_at"]):
            self.ledger.drop_key(self.name, scoped)
            stored = None
        if stored is None:
            return None
        if stored["state"] == "in_progress" or scoped in self.in_flight:
            raise KeyInUse(scoped)
        if same_payload and stored["payload_fingerprint"] != payload_fingerprint:
            raise KeyReused(stored["payload_fingerprint"])
        return stored

    @contextlib.contextmanager
    def processing(self, scoped: str | None, payload_fingerprint: str | None, *,
                   committed: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """While a write is processed: its key held in progress and the write counted in ``in_flight`` (keyed or
        not: two writes may share a key once the first one's expired, and the second must not end the first
        one's count). A write that fails lets its key go, unless it ``committed`` first."""
        busy = scoped if scoped is not None else NO_KEY
        if scoped is not None:
            self.ledger.lock_key(self.name, scoped, payload_fingerprint, self.clock.now())
        self.in_flight[busy] += 1
        try:
            yield
        except BaseException:
            if scoped is not None and not committed():
                self.ledger.drop_key(self.name, scoped)
            raise
        finally:
            self.in_flight[busy] -= 1
            if not self.in_flight[busy]:
                del self.in_flight[busy]


# each destination process holds an exclusive lock on this file of its own folder for as long as it lives: a folder
# whose harness is dead may still hold a live ledger (an orphan finishing a slow write, then saving the ledger
# into its run's evidence folder), which no other harness may delete
LIVE_LOCK = ".live"


def hold_live_lock(folder: str | os.PathLike[str]) -> int:
    """Take ``folder``'s live lock for the life of this process (the fd is never closed: the kernel drops the
    lock when the process ends, however it ends); returns the fd."""
    import fcntl

    fd = os.open(Path(folder) / LIVE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
