"""Fake destinations with configurable idempotency contracts, and their SQLite effect ledger.

Public names are loaded lazily: the destination process imports this package first and must not
pay for pydantic (``spec``) or process control it never uses.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DestinationError": "fake_destinations.host",
    "DestinationHost": "fake_destinations.host",
    "DestinationPool": "fake_destinations.host",
    "DestinationSpec": "fake_destinations.spec",
    "DestinationStartError": "fake_destinations.host",
    "SERVICES": "fake_destinations.services",
    "describe": "fake_destinations.spec",
    "read_effects": "fake_destinations.ledger",
    "read_requests": "fake_destinations.ledger",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fake_destinations' has no attribute {name!r}")
