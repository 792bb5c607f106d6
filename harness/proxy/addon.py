"""The fault-injecting mitmproxy addon: applies a scenario's rules and writes the proxy journal.

The host swaps in one :class:`ScenarioState` per scenario (on the proxy's event loop); the hooks only
read it. Each flow is journaled exactly once, at the point where its fate is sealed (response about
to be sent, connection killed, or error), and counted in flight until then so ``finish()`` can wait.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mitmproxy import ctx, http

from harness.contract import FLOW_HEADER, TRACEPARENT_HEADER
from harness.fingerprint import fingerprint_body
from harness.journal import JournalWriter, redact_headers
from harness.proxy.rules import REQUEST_ACTIONS, FaultRule, RequestFacts, RuleBook

META = "harness"
log = logging.getLogger(__name__)


@dataclass
class ScenarioState:
    """Everything the hooks need for one scenario run."""

    book: RuleBook
    journal: JournalWriter
    by_listener: Mapping[str, str] = field(default_factory=dict)  # reverse mode spec -> destination
    by_address: Mapping[tuple[str, int], str] = field(default_factory=dict)  # forward: upstream -> destination
    upstreams: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # destination -> (host, port)
    secrets: tuple[str, ...] = ()
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.idle.set()


def _client_socket(flow: http.HTTPFlow) -> socket.socket | None:
    """The accepted client socket, found through the proxyserver's connection handlers."""
    ps = ctx.master.addons.get("proxyserver")
    for handler in getattr(ps, "connections", {}).values():
        if handler.client is flow.client_conn or handler.client.id == flow.client_conn.id:
            io = handler.transports.get(handler.client)
            writer = getattr(io, "writer", None)
            return writer.get_extra_info("socket") if writer is not None else None
    return None


class FaultInjector:
    """mitmproxy addon: one per proxy host, reused across scenarios."""

    def __init__(self) -> None:
        self.scenario: ScenarioState | None = None

    # -- helpers ------------------------------------------------------------------------------

    def _destination(self, flow: http.HTTPFlow, state: ScenarioState) -> str | None:
        mode = flow.client_conn.proxy_mode
        name = state.by_listener.get(mode.full_spec)
        if name is None:
            name = state.by_address.get((flow.request.host, flow.request.port))
        return name

    def _finish(self, flow: http.HTTPFlow, outcome: str, client_status: int | None = None) -> None:
        """Journal the flow once and take it out of the in-flight count."""
        meta = flow.metadata.get(META)
        if meta is None or meta.get("done"):
            return
        meta["done"] = True
        state: ScenarioState = meta["state"]
        rule: FaultRule | None = meta["rule"]
        req = flow.request
        resp = flow.response if client_status is not None else None
        try:
            if not state.journal.closed:
                state.journal.write({
                    "flow_id": meta["flow_id"], "ts_request": meta["ts_request"], "ts_done": time.time(),
                    "destination": meta["destination"], "method": req.method, "path": req.path.split("?", 1)[0],
                    "query": req.path.split("?", 1)[1] if "?" in req.path else None,
                    "headers": meta["headers"], "body_fingerprint": meta["body_fingerprint"],
                    "idempotency_key": meta["idempotency_key"], "traceparent": meta["headers"].get(TRACEPARENT_HEADER),
                    "rule_id": rule.id if rule else None, "fault": rule.action if rule else None,
                    "forwarded": meta["forwarded"], "upstream_status": meta.get("upstream_status"),
                    "client_outcome": outcome, "client_status": client_status,
                    "client_retry_after": resp.headers.get("retry-after") if resp is not None else None,
                    "forward_count": meta["forward_count"],
                })
        finally:
            state.in_flight -= 1
            if state.in_flight == 0:
                state.idle.set()

    async def _forward_copy(self, flow: http.HTTPFlow, state: ScenarioState, destination: str) -> None:
        """Send one extra copy of the request straight to the destination; its answer is lost."""
        from mitmproxy.net.http.http1 import assemble_request

        host, port = state.upstreams[destination]
        copy = flow.request.copy()
        copy.headers["connection"] = "close"
        copy.host, copy.port = host, port
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
        try:
            writer.write(assemble_request(copy))
            await writer.drain()
            await asyncio.wait_for(reader.read(), 10)  # until the destination closes: it has answered
        finally:
            writer.close()

    # -- hooks --------------------------------------------------------------------------------

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or not flow.live:
            return
        state = self.scenario
        if state is None or state.journal.closed:
            return
        destination = self._destination(flow, state)
        if destination is None:
            return
        req = flow.request
        if req.scheme == "https" and state.by_address:
            req.scheme = "http"  # forward HTTPS: the agent spoke TLS to us; destinations are plain HTTP
        headers = redact_headers(req.headers.items(multi=True), state.secrets)
        facts = RequestFacts(destination, req.method, req.path, {k.lower(): v for k, v in req.headers.items()},
                            req.raw_content or b"", fingerprint_body(req.raw_content))
        rule = state.book.decide(facts)
        flow_id = "flw_" + uuid.uuid4().hex[:16]
        meta: dict[str, Any] = {
            "state": state, "flow_id": flow_id, "ts_request": req.timestamp_start or time.time(),
            "destination": destination, "rule": rule, "headers": headers,
            "body_fingerprint": facts.fingerprint, "idempotency_key": facts.idempotency_key,
            "forwarded": False, "forward_count": 0,
        }
        flow.metadata[META] = meta
        state.in_flight += 1
        state.idle.clear()
        req.headers[FLOW_HEADER] = flow_id
        if rule is None or rule.action not in REQUEST_ACTIONS:
            meta["forwarded"], meta["forward_count"] = True, 1
            return
        if rule.action == "drop_request":
            flow.kill()
            self._finish(flow, "connection_closed")
        elif rule.action == "synthetic_status":
            flow.response = _synthetic(rule)
        elif rule.action == "latency":
            await asyncio.sleep(rule.delay_ms / 1000.0 + state.book.jitter(rule))
            meta["forwarded"], meta["forward_count"] = True, 1
        elif rule.action == "duplicate_delivery":
            try:
                await self._forward_copy(flow, state, destination)
                meta["forward_count"] = 1
            except (OSError, asyncio.TimeoutError) as e:
                log.warning("duplicate_delivery %s: extra copy to %s failed: %s", rule.id, destination, e)
            meta["forwarded"] = True
            meta["forward_count"] += 1

    async def response(self, flow: http.HTTPFlow) -> None:
        meta = flow.metadata.get(META)
        if meta is None or meta.get("done") or flow.error or not flow.live:
            return
        rule: FaultRule | None = meta["rule"]
        resp = flow.response
        assert resp is not None
        if not meta["forwarded"]:  # synthetic answer: nothing reached the destination
            self._finish(flow, "response", resp.status_code)
            return
        meta["upstream_status"] = resp.status_code
        action = rule.action if rule else None
        if action == "drop_response_after_commit":
            flow.kill()
            self._finish(flow, "connection_closed")
        elif action == "reset_after_commit":
            sock = _client_socket(flow)
            if sock is not None:  # linger 0: close() sends RST instead of FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            flow.kill()
            self._finish(flow, "connection_reset" if sock is not None else "connection_closed")
        elif action == "hold_response":
            await asyncio.sleep((rule.hold_ms or 0) / 1000.0)
            client_gone = flow.client_conn.timestamp_end is not None
            if rule.then == "drop":
                flow.kill()
                self._finish(flow, "timeout" if client_gone else "connection_closed")
            else:
                self._finish(flow, "timeout" if client_gone else "response", None if client_gone else resp.status_code)
        elif action == "replace_status":
            flow.response = _synthetic(rule)
            self._finish(flow, "response", rule.status)
        elif action == "truncate_body":
            full = resp.raw_content or b""
            resp.headers.pop("transfer-encoding", None)
            resp.raw_content = full[: rule.keep_bytes]
            resp.headers["content-length"] = str(len(full))  # promise the whole body, then close early
            resp.headers["connection"] = "close"
            self._finish(flow, "connection_closed", resp.status_code)
        elif action == "malformed_chunk":
            resp.headers.pop("content-length", None)
            resp.headers.pop("transfer-encoding", None)
            resp.headers["connection"] = "close"
            # mitmproxy frames bodies itself when it sees Transfer-Encoding, so the header travels
            # folded into another one and the body carries a chunk size that is not hex.
            resp.headers.fields = resp.headers.fields + ((b"Via", b"1.1 proxy\r\nTransfer-Encoding: chunked"),)
            resp.raw_content = b"zz\r\n" + (resp.raw_content or b"")[:16] + b"\r\n0\r\n\r\n"
            self._finish(flow, "connection_closed", resp.status_code)
        else:
            self._finish(flow, "response", resp.status_code)

    def error(self, flow: http.HTTPFlow) -> None:
        meta = flow.metadata.get(META)
        if meta is None or meta.get("done"):
            return
        if flow.response is None and meta["forwarded"] and flow.server_conn.timestamp_start is None:
            meta["forwarded"] = False  # the destination could not be reached
        self._finish(flow, "connection_closed")


def _synthetic(rule: FaultRule) -> http.Response:
    status = rule.status or 503
    headers = {"content-type": "application/json"}  # nothing tells the agent it is injected
    if rule.retry_after is not None:
        headers["retry-after"] = str(rule.retry_after)
    body = rule.body if rule.body is not None else f'{{"error":"HTTP {status}"}}'
    return http.Response.make(status, body.encode(), headers)
