"""What the fault proxy holds for one scenario run: its rules, its journal, its routes and the flows in flight.

The server (``server.py``) makes one per scenario; the addon's hooks (``addon.py``) and the fault handlers
(``faults.py``) read it, so it lives apart from both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.journal import JournalWriter
from harness.proxy.rules import RuleBook
from harness.proxy.traffic import TrafficWriter

if TYPE_CHECKING:
    from mitmproxy import http


@dataclass
class ScenarioState:
    """Everything the hooks need for one scenario run."""

    book: RuleBook
    journal: JournalWriter
    by_listener: Mapping[str, str] = field(default_factory=dict)  # reverse mode spec -> destination
    by_address: Mapping[tuple[str, int], str] = field(default_factory=dict)  # forward: upstream -> destination
    upstreams: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # destination -> (host, port)
    secrets: tuple[str, ...] = ()
    traffic: TrafficWriter | None = None  # traffic.har and traffic.mitm, written beside the journal
    gate: str | None = None  # the run's contract.GATE_HEADER value, added to every request forwarded
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    flows: dict[str, http.HTTPFlow] = field(default_factory=dict)  # flow_id -> flow still in flight

    def __post_init__(self) -> None:
        self.idle.set()
