"""The fault-injecting mitmproxy addon: applies a scenario's rules and writes the proxy journal.

The host swaps in one ``ScenarioState`` (``state.py``) per scenario (on the proxy's event loop); the hooks only
read it. Each flow is journaled exactly once, at the point where its fate is sealed (response about
to be sent, connection killed, or error), and counted in flight until then so ``finish()`` can wait.
When a rule fires, the hook of its action's phase calls the action's handler (``faults.py``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from mitmproxy import http
from mitmproxy.flow import Error

from harness.contract import FLOW_HEADER, GATE_HEADER
from harness.fingerprint import fingerprint_body
from harness.journal import IN_FLIGHT_AT_END, redact_headers
from harness.proxy.faults import FAULT_NOTE, PROCESS_KILLED, REQUEST_HANDLERS, RESPONSE_HANDLERS, RPC_META
from harness.proxy.rules import FaultRule, RequestFacts, RpcFacts
from harness.proxy.state import ScenarioState
from harness.proxy.traffic import TrafficWriter

META = "harness"
log = logging.getLogger(__name__)


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
                record = state.journal.write({
                    "flow_id": meta["flow_id"], "ts_request": meta["ts_request"], "ts_done": time.time(),
                    "destination": meta["destination"], "method": req.method, "path": req.path.split("?", 1)[0],
                    "query": req.path.split("?", 1)[1] if "?" in req.path else None,
                    "headers": meta["headers"], "body_fingerprint": meta["body_fingerprint"],
                    "idempotency_key": meta["idempotency_key"], "traceparent": meta["traceparent"],
                    "rule_id": rule.id if rule else None, "fault": rule.action if rule else None,
                    "forwarded": meta["forwarded"], "upstream_status": meta.get("upstream_status"),
                    "client_outcome": outcome, "client_status": client_status,
                    "client_retry_after": resp.headers.get("retry-after") if resp is not None else None,
                    "forward_count": meta["forward_count"],
                    "rpc": rpc_entry(flow.metadata.get(RPC_META), resp, outcome),
                    "fault_note": flow.metadata.get(FAULT_NOTE),
                    "process_killed": flow.metadata.get(PROCESS_KILLED),
                })
                if state.traffic is not None:
                    self._save_traffic(state.traffic, flow, record)
        finally:
            state.flows.pop(meta["flow_id"], None)
            state.in_flight -= 1
            if state.in_flight == 0:
                state.idle.set()

    @staticmethod
    def _save_traffic(traffic: TrafficWriter, flow: http.HTTPFlow, record: dict[str, Any]) -> None:
        """The flow into the traffic files; a failure there is logged, never a changed run."""
        upstream_error = flow.error.msg if flow.error is not None and record["client_outcome"] == "response" else None
        try:
            traffic.add(flow, record, upstream_error)
        except Exception:
            log.exception("traffic files: flow %s not saved", record.get("flow_id"))

    def journal_in_flight(self, state: ScenarioState) -> list[str]:
        """At the scenario's end, journal every flow still in flight as ``in_flight_at_end`` (what is
        known of it: forwarded, the destination's status if it answered) so no request the
        destination saw is missing from the journal, then kill it: after its scenario nothing more
        reaches a (pooled) destination or the agent. Returns their flow ids."""
        left = list(state.flows.values())
        for flow in left:
            self._finish(flow, IN_FLIGHT_AT_END)
            if flow.killable:
                flow.kill()
        return [flow.metadata[META]["flow_id"] for flow in left]

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
            "body_fingerprint": facts.body_fingerprint, "idempotency_key": facts.idempotency_key,
            "traceparent": facts.traceparent, "forwarded": False, "forward_count": 0,
        }
        flow.metadata[META] = meta
        if facts.rpc is not None:
            flow.metadata[RPC_META] = facts.rpc
        state.in_flight += 1
        state.flows[flow_id] = flow
        state.idle.clear()
        req.headers[FLOW_HEADER] = flow_id
        if state.gate is not None:  # the destinations serve only what carries it: nothing past the proxy
            req.headers[GATE_HEADER] = state.gate
        handler = REQUEST_HANDLERS.get(rule.action) if rule is not None else None
        if rule is None or handler is None:  # untouched, or a fault that acts on the response
            meta["forwarded"], meta["forward_count"] = True, 1
            return
        count = await handler(flow, rule, state, destination)
        meta["forwarded"], meta["forward_count"] = count > 0, count
        if count == 0 and flow.error:  # killed before forwarding (drop_request): its fate is sealed
            self._finish(flow, "connection_closed")

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
        handler = RESPONSE_HANDLERS.get(rule.action) if rule is not None else None
        if rule is None or handler is None:  # untouched, or a fault that acted on the request
            self._finish(flow, "response", resp.status_code)
            return
        self._finish(flow, *await handler(flow, rule))

    def error(self, flow: http.HTTPFlow) -> None:
        meta = flow.metadata.get(META)
        if meta is None or meta.get("done"):
            return
        if flow.response is None and meta["forwarded"] and flow.server_conn.timestamp_start is None:
            meta["forwarded"], meta["forward_count"] = False, 0  # the destination could not be reached
        if _client_gets_502(flow):
            self._finish(flow, "response", 502)
        else:
            self._finish(flow, "connection_closed")


def rpc_entry(rpc: RpcFacts | None, response: http.Response | None, outcome: str) -> dict[str, Any] | None:
    """The journal's ``rpc`` of a JSON-RPC flow: its method, id, tool, and whether the result the client
    received is a tool error (null when it received no JSON-RPC result)."""
    if rpc is None:
        return None
    is_error = None  # a tool result's isError: a tools/call's alone
    if rpc.is_tool_call and response is not None and outcome == "response":
        is_error = _result_is_error(response, rpc.id)
    return {"method": rpc.method, "id": rpc.id, "tool": rpc.tool, "is_error": is_error}


def _result_is_error(response: http.Response, rid: int | str | None) -> bool | None:
    """``result.isError`` of the JSON-RPC answer to ``rid``: a JSON body, or the matching message of an SSE
    stream (a Streamable HTTP server may answer either way)."""
    kind = response.headers.get("content-type", "").split(";", 1)[0].strip()
    try:
        if kind == "application/json":
            docs = [json.loads(response.content or b"")]
        elif kind == "text/event-stream":
            text = (response.content or b"").decode("utf-8")
            docs = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        else:
            return None
    except (ValueError, UnicodeDecodeError):
        return None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("id") == rid and isinstance(doc.get("result"), dict):
            return doc["result"].get("isError") is True
    return None


def _client_gets_502(flow: http.HTTPFlow) -> bool:
    """Whether mitmproxy answers the client 502 for this error (its http layer sends a ResponseProtocolError
    as ``502 Bad Gateway`` when no response was sent yet): the destination was down or failed, the
    flow was not killed by us, and the client is still there to read it."""
    message = flow.error.msg if flow.error else ""
    return (message != Error.KILLED_MESSAGE and not message.startswith("Client disconnected")
            and flow.client_conn.timestamp_end is None)

