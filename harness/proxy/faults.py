"""One handler per fault action: what the proxy does to a flow when a rule fires.

The actions are declared in ``rules.ACTIONS`` (free of mitmproxy, so that scenarios validate without
it); here each request- and response-phase action gets its handler, registered by name, and this
module fails to import unless the two match exactly. Connection-phase actions act before any request
exists: the host implements them with its listeners (``refuse_connection``: it opens none).

- A request handler, ``async (flow, rule, state, destination) -> int``, runs in the ``request`` hook
  before the flow is forwarded and returns how many times the request reaches the destination (0:
  not forwarded; the handler set ``flow.response``, or killed the flow and the hook journals it).
- A response handler, ``async (flow, rule) -> (client_outcome, client_status)``, runs in the
  ``response`` hook with the destination's answer in ``flow.response`` and returns what the client
  receives, for the journal.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from mitmproxy import ctx, http

from harness.proxy.rules import ACTIONS, DEFAULT_TOOL_ERROR, FaultRule, RpcFacts

if TYPE_CHECKING:
    from harness.proxy.state import ScenarioState

RequestHandler = Callable[[http.HTTPFlow, FaultRule, "ScenarioState", str], Awaitable[int]]
ResponseHandler = Callable[[http.HTTPFlow, FaultRule], Awaitable[tuple[str, int | None]]]
REQUEST_HANDLERS: dict[str, RequestHandler] = {}
RESPONSE_HANDLERS: dict[str, ResponseHandler] = {}
HOST_ACTIONS = frozenset({"refuse_connection"})  # connection-phase actions the host implements
RPC_META = "harness.rpc"  # flow.metadata: the flow's RpcFacts (set by the addon for a JSON-RPC request)
# flow.metadata: why a fault could not act as declared (the addon journals it as fault_note)
FAULT_NOTE = "harness.fault_note"
# flow.metadata: the process a fault killed, ``{"pid", "command", "ts"}`` (the addon journals it as process_killed)
PROCESS_KILLED = "harness.process_killed"
NOT_A_TOOL_CALL = "{action} needs a JSON-RPC tools/call request; this flow's body is none: answered 400"
log = logging.getLogger(__name__)


def _check_new(name: str, phase: str, handlers: Mapping[str, object]) -> None:
    declared = ACTIONS.get(name)
    if declared is None:
        raise ValueError(f"no fault action {name!r} is declared in harness.proxy.rules.ACTIONS")
    if declared.phase != phase:
        raise ValueError(f"fault action {name!r} is declared for the {declared.phase} phase, not the {phase} phase")
    if name in handlers:
        raise ValueError(f"fault action {name!r} already has a handler: {handlers[name]!r}")


def on_request(name: str) -> Callable[[RequestHandler], RequestHandler]:
    """Register the handler of a declared request-phase action."""
    _check_new(name, "request", REQUEST_HANDLERS)

    def register(handler: RequestHandler) -> RequestHandler:
        REQUEST_HANDLERS[name] = handler
        return handler
    return register


def on_response(name: str) -> Callable[[ResponseHandler], ResponseHandler]:
    """Register the handler of a declared response-phase action."""
    _check_new(name, "response", RESPONSE_HANDLERS)

    def register(handler: ResponseHandler) -> ResponseHandler:
        RESPONSE_HANDLERS[name] = handler
        return handler
    return register


def check_handlers(request: Mapping[str, object], response: Mapping[str, object]) -> None:
    """Every declared action has exactly one handler: a hook handler, or the host's listeners."""
    for phase, handlers in (("request", request), ("response", response), ("connection", HOST_ACTIONS)):
        declared = {name for name, a in ACTIONS.items() if a.phase == phase}
        missing, extra = sorted(declared - set(handlers)), sorted(set(handlers) - declared)
        if missing or extra:
            raise ValueError(f"{phase}-phase fault actions and their handlers differ: declared without a "
                             f"handler {missing}, handled but not declared {extra}")


# -- request phase: before the request is forwarded -----------------------------------------------

@on_request("drop_request")
async def drop_request(flow: http.HTTPFlow, rule: FaultRule, state: ScenarioState, destination: str) -> int:
    flow.kill()
    return 0


@on_request("synthetic_status")
async def synthetic_status(flow: http.HTTPFlow, rule: FaultRule, state: ScenarioState, destination: str) -> int:
    flow.response = _synthetic(rule)
    return 0


@on_request("tool_error_result")
async def tool_error_result(flow: http.HTTPFlow, rule: FaultRule, state: ScenarioState, destination: str) -> int:
    flow.response = _tool_error(flow, rule)
    return 0


@on_request("latency")
async def latency(flow: http.HTTPFlow, rule: FaultRule, state: ScenarioState, destination: str) -> int:
    await asyncio.sleep(rule.delay_ms / 1000.0 + state.book.jitter(rule))
    return 1


@on_request("duplicate_delivery")
async def duplicate_delivery(flow: http.HTTPFlow, rule: FaultRule, state: ScenarioState, destination: str) -> int:
    try:
        await _forward_copy(flow, state.upstreams[destination])
    except (OSError, TimeoutError) as e:
        log.warning("duplicate_delivery %s: extra copy to %s failed: %s", rule.id, destination, e)
        return 1
    return 2


async def _forward_copy(flow: http.HTTPFlow, upstream: tuple[str, int]) -> None:
    """Send one extra copy of the request straight to the destination; its answer is lost."""
    from mitmproxy.net.http.http1 import assemble_request

    host, port = upstream
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


# -- response phase: the destination has answered (and committed) ---------------------------------

@on_response("drop_response_after_commit")
async def drop_response_after_commit(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    flow.kill()
    return "connection_closed", None


@on_response("reset_after_commit")
async def reset_after_commit(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    sock = _client_socket(flow)
    if sock is not None:  # linger 0: close() sends RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    flow.kill()
    return ("connection_reset" if sock is not None else "connection_closed"), None


@on_response("kill_sender_after_commit")
async def kill_sender_after_commit(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    """The destination committed; the process that sent the request dies before it reads the answer, as a worker
    killed between the commit and recording its result (or acking its message): what reruns the work is its
    engine's business. The journal names the process (``process_killed``)."""
    from harness.connection_owner import command_of, sending_process

    pid = sending_process(flow.client_conn.peername, flow.client_conn.sockname)
    if pid is None or pid == os.getpid():
        flow.metadata[FAULT_NOTE] = ("kill_sender_after_commit: the process that sent the request could not be "
                                     "found in /proc: nothing was killed, the answer was dropped")
    else:
        command = command_of(pid)
        try:
            os.kill(pid, signal.SIGKILL)
            flow.metadata[PROCESS_KILLED] = {"pid": pid, "command": command, "ts": time.time()}
        except OSError as exc:
            flow.metadata[FAULT_NOTE] = f"kill_sender_after_commit: could not kill process {pid} ({exc})"
    flow.kill()
    return "connection_closed", None


@on_response("hold_response")
async def hold_response(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    assert flow.response is not None
    # held until hold_ms, or until the client gives up: holding an answer nobody waits for any longer
    # changes nothing it sees, and would only keep the run's teardown waiting
    until = time.monotonic() + (rule.hold_ms or 0) / 1000.0
    while (left := until - time.monotonic()) > 0 and flow.client_conn.timestamp_end is None:
        await asyncio.sleep(min(left, 0.02))
    client_gone = flow.client_conn.timestamp_end is not None
    if rule.then == "drop":
        flow.kill()
        return ("timeout" if client_gone else "connection_closed"), None
    if client_gone:
        return "timeout", None
    return "response", flow.response.status_code


@on_response("replace_status")
async def replace_status(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    flow.response = _synthetic(rule)
    return "response", rule.status


@on_response("tool_error_after_commit")
async def tool_error_after_commit(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    flow.response = _tool_error(flow, rule)
    return "response", flow.response.status_code


@on_response("truncate_body")
async def truncate_body(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    resp = flow.response
    assert resp is not None
    full = resp.raw_content or b""
    resp.headers.pop("transfer-encoding", None)
    resp.raw_content = full[: rule.keep_bytes]
    # promise the whole body, then close early; a body no longer than keep_bytes is promised one byte more,
    # so that the client always gets a broken body, as the journal says (not a whole answer)
    resp.headers["content-length"] = str(max(len(full), len(resp.raw_content) + 1))
    resp.headers["connection"] = "close"
    return "connection_closed", resp.status_code


@on_response("malformed_chunk")
async def malformed_chunk(flow: http.HTTPFlow, rule: FaultRule) -> tuple[str, int | None]:
    resp = flow.response
    assert resp is not None
    resp.headers.pop("content-length", None)
    resp.headers.pop("transfer-encoding", None)
    resp.headers["connection"] = "close"
    # mitmproxy frames bodies itself when it sees Transfer-Encoding, so the header travels
    # folded into another one and the body carries a chunk size that is not hex.
    resp.headers.fields = resp.headers.fields + ((b"Via", b"1.1 proxy\r\nTransfer-Encoding: chunked"),)
    resp.raw_content = b"zz\r\n" + (resp.raw_content or b"")[:16] + b"\r\n0\r\n\r\n"
    return "connection_closed", resp.status_code


def _client_socket(flow: http.HTTPFlow) -> socket.socket | None:
    """The accepted client socket, found through the proxyserver's connection handlers."""
    ps = ctx.master.addons.get("proxyserver")
    for handler in getattr(ps, "connections", {}).values():
        if handler.client is flow.client_conn or handler.client.id == flow.client_conn.id:
            io = handler.transports.get(handler.client)
            writer = getattr(io, "writer", None)
            return writer.get_extra_info("socket") if writer is not None else None
    return None


def _synthetic(rule: FaultRule) -> http.Response:
    status = rule.status or 503
    headers = {"content-type": "application/json"}  # nothing tells the agent it is injected
    if rule.retry_after is not None:
        headers["retry-after"] = str(rule.retry_after)
    body = rule.body if rule.body is not None else f'{{"error":"HTTP {status}"}}'
    return http.Response.make(status, body.encode(), headers)


def _tool_error(flow: http.HTTPFlow, rule: FaultRule) -> http.Response:
    """An MCP tool error result for the flow's tools/call, echoing its id (as a server's own would read);
    a 400 when the flow is no JSON-RPC tools/call, and the journal says why.

    The result is valid on the wire the session speaks: after the commit it is the server's own result (its
    ``resultType``, ``_meta``, whatever its SDK wrote) with the error's content in place of the real one;
    before, on the 2026-07-28 wire (mcp 2.x's modern sessions, whose clients require it), it says
    ``resultType: complete``, as the SDK's ``CallToolResult`` does."""
    rpc: RpcFacts | None = flow.metadata.get(RPC_META)
    if rpc is None or not rpc.is_tool_call:
        note = NOT_A_TOOL_CALL.format(action=rule.action)
        flow.metadata[FAULT_NOTE] = note
        return http.Response.make(400, json.dumps({"error": "bad_request", "message": note}).encode(),
                                  {"content-type": "application/json"})
    text = rule.body if rule.body is not None else DEFAULT_TOOL_ERROR
    result = _server_result(flow.response, rpc.id)
    if result is None:
        result = {"resultType": "complete"} if _modern_wire(flow.request) else {}
    result.pop("structuredContent", None)  # the real result's: an error result carries only its text
    result.update(content=[{"type": "text", "text": text}], isError=True)
    answer = {"jsonrpc": "2.0", "id": rpc.id, "result": result}
    return http.Response.make(200, json.dumps(answer).encode(), {"content-type": "application/json"})


MODERN_PROTOCOL = "2026-07-28"  # the first MCP protocol whose results must say their resultType


def _modern_wire(request: http.Request) -> bool:
    """The request is on the 2026-07-28 wire or later (its ``MCP-Protocol-Version``; dates sort as text)."""
    return request.headers.get("mcp-protocol-version", "") >= MODERN_PROTOCOL


def _server_result(response: http.Response | None, rid: object) -> dict[str, object] | None:
    """The ``result`` object of the server's own JSON answer to ``rid``, or None (no answer yet, an SSE or
    error answer, not JSON)."""
    if response is None or "json" not in response.headers.get("content-type", ""):
        return None
    try:
        doc = json.loads(response.get_content() or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("id") != rid or not isinstance(doc.get("result"), dict):
        return None
    return dict(doc["result"])


check_handlers(REQUEST_HANDLERS, RESPONSE_HANDLERS)
