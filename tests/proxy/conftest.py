"""Fixtures for the fault proxy tests: a real aiohttp destination and the process's real proxy.

The destination is a small ticket service on 127.0.0.1 that records every request it received
(its ground truth, like the effect ledger) and commits one effect per POST.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from harness.proxy.host import ProxyHost, ProxyRoutes


@dataclass
class Destination:
    """A running ticket service and what it recorded."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)

    def clear(self) -> None:
        self.requests.clear()
        self.effects.clear()


def _app(dest: Destination) -> web.Application:
    ids = itertools.count(1)

    async def record(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        dest.requests.append({"method": request.method, "path": request.path, "body": body,
                              "flow_id": request.headers.get("X-Harness-Flow"),
                              "headers": dict(request.headers)})
        if request.method == "POST":
            ref = f"tkt_{next(ids)}"
            dest.effects.append({"effect_ref": ref, "flow_id": request.headers.get("X-Harness-Flow")})
            return web.json_response({"id": ref, "padding": "x" * 64}, status=201)
        return web.json_response({"items": [e["effect_ref"] for e in dest.effects]})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return app


@pytest.fixture(scope="session")
def make_destination() -> Iterator[Destination]:
    """Starts the destination once per session, in its own thread and loop."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    dest = Destination(url="")
    box: dict[str, Any] = {}

    def serve() -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(_app(dest), access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["runner"] = runner
        dest.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True, name="test-destination")
    thread.start()
    assert ready.wait(10), "destination did not start"
    try:
        yield dest
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture
def destination(make_destination: Destination) -> Destination:
    make_destination.clear()
    return make_destination


@pytest.fixture
def proxy_host() -> Iterator[ProxyHost]:
    # each test asks for the process's proxy (started once, cheap after): a test elsewhere in this worker may have
    # stopped it (tests/engine/test_evidence_attacks.py stops it on purpose), and a dead host must not be handed on
    host = ProxyHost.shared()
    try:
        yield host
    finally:
        host.finish()


class Scenario:
    """Configures the shared proxy for one test; ``finish()`` runs at teardown even on failure."""

    def __init__(self, host: ProxyHost, destination: Destination, tmp_path: Path) -> None:
        self.host = host
        self.destination = destination
        self.journal_path = tmp_path / "journal.ndjson"

    def configure(self, rules: list[dict[str, Any]], **kw: Any) -> ProxyRoutes:
        return self.host.configure({"tickets": self.destination.url}, rules, self.journal_path, **kw)

    def journal(self) -> list[dict[str, Any]]:
        from harness.journal import read_journal

        self.host.finish()
        return read_journal(self.journal_path)


@pytest.fixture
def scenario(proxy_host: ProxyHost, destination: Destination, tmp_path: Path) -> Iterator[Scenario]:
    s = Scenario(proxy_host, destination, tmp_path)
    try:
        yield s
    finally:
        proxy_host.finish()
