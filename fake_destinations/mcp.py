"""An MCP tool server: the `mcp` package's low-level ``Server`` behind its
``StreamableHTTPSessionManager`` (stateless, JSON answers: each POST carries one JSON-RPC message and
gets one ``application/json`` answer, so the fault proxy sees a whole exchange in one flow), served by
uvicorn on the destination process's event loop.

Its tools come from the scenario's ``tools:`` (``spec.McpTool``, here as the plain dict the process
receives). A tool with an ``effect`` commits one (a resource ``{"id", "status", **arguments}``) as the
HTTP destinations do: the same ledger, clock, declared failures, rate limit and processing delay; its
idempotency is ``none``, ``argument`` (a key argument: same key and same other arguments replay the
first result, other arguments the error result ``idempotent_parameter_mismatch``) or ``natural_key`` (one
effect per value of an argument). Keys are per tool and never expire. Errors are MCP tool errors
(``isError: true``, one text ``"<code>: <message>"``), never HTTP errors.

Ledger rows: one per JSON-RPC message received. A tools/call is recorded by its handler (it knows the
outcome); every other message (initialize, notifications/initialized, tools/list...) by the ASGI
wrapper, when its HTTP answer starts, with outcome ``read``.

Imported only when a scenario declares an MCP destination: mcp, starlette and uvicorn cost start-up time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import mcp.types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from fake_destinations.ledger import Ledger
from fake_destinations.peer import sender
from fake_destinations.runtime import (
    UNGATED_BODY,
    UNGATED_STATUS,
    Clock,
    DestinationRuntime,
    KeyInUse,
    KeyReused,
    RateLimited,
)
from harness.contract import (
    CLIENT_REFERENCE_FIELD,
    FLOW_HEADER,
    GATE_HEADER,
    LOOKUP_RESULT_FIELD,
    MCP_ENDPOINT,
    MCP_TOOL_CALL,
    TRACEPARENT_HEADER,
    mcp_sdk_major,
)
from harness.fingerprint import fingerprint

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
RECORDED = "harness.recorded"  # set in the ASGI scope by the tools/call handler that recorded its row


class ToolError(Exception):
    """Ends a tool call with an MCP tool error result; ``outcome`` is the ledger's."""

    def __init__(self, code: str, message: str, outcome: str = "rejected") -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.outcome = code, outcome


def _result(structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(structured))],
                                structuredContent=structured, isError=False)


def _error_result(error: ToolError) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(error))], isError=True)


def _id_prefix(effect: str) -> str:
    """order_created -> ord: the resource ids of a tool read like the built-in services' (tkt_0001)."""
    return (effect.split("_", 1)[0] or "res")[:3]


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the destination process owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class McpDestination(DestinationRuntime):
    """One MCP tool server on its own port."""

    def __init__(self, name: str, spec: dict[str, Any], ledger: Ledger, clock: Clock) -> None:
        super().__init__(name, spec, ledger, clock)
        self.server = self._server()
        self.manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)
        self.http: _QuietServer | None = None
        self.serving: asyncio.Task[None] | None = None

    @property
    def endpoint(self) -> str:
        return self.spec.get("endpoint") or MCP_ENDPOINT

    @property
    def tools(self) -> dict[str, dict[str, Any]]:
        return self.spec["tools"]

    # -- serving -----------------------------------------------------------------------------

    async def start(self, stack: contextlib.AsyncExitStack, port: int) -> int:
        """Serve on 127.0.0.1:port (0: any); returns the port bound. ``stack`` stops it."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart binds the same port again
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            raise
        bound = sock.getsockname()[1]
        await stack.enter_async_context(self.manager.run())
        config = uvicorn.Config(self.asgi, lifespan="off", log_config=None, log_level="warning", access_log=False,
                                timeout_graceful_shutdown=1, http="h11", interface="asgi3",
                                proxy_headers=False)
        self.http = _QuietServer(config)
        self.serving = asyncio.create_task(self.http.serve(sockets=[sock]))
        stack.push_async_callback(self._stop, sock)
        while not self.http.started:  # bound already: this is uvicorn setting up its protocol
            if self.serving.done():
                self.serving.result()
                raise OSError(f"MCP destination {self.name} stopped during start-up")
            await asyncio.sleep(0.002)
        return bound

    async def _stop(self, sock: socket.socket) -> None:
        if self.http is not None and self.serving is not None:
            self.http.should_exit = True
            with contextlib.suppress(Exception):
                await self.serving
        sock.close()

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every HTTP request: the MCP endpoint's go to the session manager, each JSON-RPC message but a
        recorded tools/call written to the ledger when its answer starts."""
        if scope["type"] != "http":
            return
        received_at = self.clock.wall()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        if not self.past_the_gate(headers.get(GATE_HEADER.lower())):  # past the proxy: recorded, nothing done
            self.ledger.record({**self._row(scope["method"], scope["path"], headers, received_at,
                                            status=UNGATED_STATUS, outcome="rejected"),
                                "sender": sender(scope.get("client"), scope.get("server"),
                                                          containers=self.agent_containers)})
            await send({"type": "http.response.start", "status": UNGATED_STATUS,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(UNGATED_BODY).encode()})
            return
        if scope["path"] != self.endpoint:
            self.ledger.record(self._row(scope["method"], scope["path"], headers, received_at,
                                         status=404, outcome="read"))
            body = json.dumps({"error": "not_found", "message": f"the MCP endpoint is {self.endpoint}"}).encode()
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        raw, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its request was whole
            raw += message.get("body", b"")
            more = message.get("more_body", False)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        messages = _rpc_messages(raw)

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                for rpc in messages:
                    if rpc.get("method") == MCP_TOOL_CALL and scope.get(RECORDED):
                        continue
                    self.ledger.record(self._protocol_row(scope, rpc, headers, received_at, status))
                if not messages:
                    self.ledger.record(self._row(scope["method"], scope["path"], headers, received_at,
                                                 status=status, outcome="read" if status < 400 else "rejected"))
            await send(message)

        await self.manager.handle_request(scope, replay, recording_send)

    def _row(self, method: str, path: str, headers: dict[str, str], received_at: float,
             **values: Any) -> dict[str, Any]:
        row: dict[str, Any] = {
            "destination": self.name, "method": method, "path": path, "query": None,
            "flow_id": headers.get(FLOW_HEADER.lower()), "traceparent": headers.get(TRACEPARENT_HEADER),
            "received_at": received_at, "idempotency_key": None, "client_reference": None,
            "payload_fingerprint": None, "effect_ref": None, "kind": None, "params": None}
        row.update(values)
        return row

    def _protocol_row(self, scope: Scope, rpc: dict[str, Any], headers: dict[str, str], received_at: float,
                      status: int) -> dict[str, Any]:
        """A JSON-RPC message other than a recorded tools/call (a tools/call the SDK refused is one)."""
        method: str = rpc["method"] if isinstance(rpc.get("method"), str) else scope["method"]
        params: dict[str, Any] = rpc["params"] if isinstance(rpc.get("params"), dict) else {}
        if method == MCP_TOOL_CALL:
            name: str = params["name"] if isinstance(params.get("name"), str) else self.endpoint
            return self._row(method, name, headers, received_at, kind=name, status=status, outcome="rejected",
                             params=params.get("arguments"), traceparent=_traceparent(headers, params.get("_meta")))
        return self._row(method, self.endpoint, headers, received_at, status=status,
                         outcome="read" if status < 400 else "rejected",
                         traceparent=_traceparent(headers, params.get("_meta")))

    # -- the MCP server ----------------------------------------------------------------------

    def _server(self) -> Server[Any, Any]:
        """The SDK's low-level server with our two handlers, registered as the installed major wants them."""
        name = f"retry-harness fake {self.name}"
        if mcp_sdk_major() >= 2:  # handlers given to the constructor, called with (context, params)
            async def on_list_tools(context: Any, params: Any) -> types.ListToolsResult:
                return types.ListToolsResult(tools=self._tools())

            async def on_call_tool(context: Any, params: Any) -> types.CallToolResult:
                return await self._call_in(context, params.name, params.arguments or {})

            return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)  # type: ignore[call-arg]

        server: Server[Any, Any] = Server(name)

        @server.list_tools()  # type: ignore[untyped-decorator,attr-defined,unused-ignore]  # untyped decorators
        async def list_tools() -> list[types.Tool]:
            return self._tools()

        # the handler checks the arguments itself: its error codes are the destination's (missing_argument)
        @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator,attr-defined,unused-ignore]
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            return await self._call_in(server.request_context, name, arguments)

        return server

    async def _call_in(self, context: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """A tools/call with what its request context holds: the HTTP request's headers, _meta, ASGI scope."""
        request = context.request
        headers = {k.lower(): v for k, v in request.headers.items()} if request is not None else {}
        meta = context.meta  # 2.x: a dict already; 1.x: a model
        meta = meta.model_dump() if hasattr(meta, "model_dump") else meta
        return await self.call(name, arguments, headers, meta, request.scope if request is not None else None)

    def _tools(self) -> list[types.Tool]:
        return [self._tool(name, tool) for name, tool in self.tools.items()]

    def _tool(self, name: str, tool: dict[str, Any]) -> types.Tool:
        properties: dict[str, Any] = {arg: {} for arg in tool.get("required") or ()}
        properties.setdefault(CLIENT_REFERENCE_FIELD, {"type": "string", "description": "the caller's operation id"})
        if tool.get("idempotency") == "argument":
            properties[tool["idempotency_argument"]] = {"type": "string", "description": "idempotency key"}
        annotations = {k: v for k, v in (tool.get("annotations") or {}).items() if v is not None}
        return types.Tool(name=name, description=tool.get("description"),
                          inputSchema={"type": "object", "properties": properties,
                                       "required": list(tool.get("required") or ())},
                          annotations=types.ToolAnnotations(**annotations) if annotations else None)

    async def call(self, name: str, arguments: dict[str, Any], headers: dict[str, str], meta: dict[str, Any] | None,
                   scope: Scope | None) -> types.CallToolResult:
        """One tools/call: its answer, and its ledger row with the effects it committed."""
        row = self._row(MCP_TOOL_CALL, name, headers, self.clock.wall(), kind=name, params=arguments,
                        client_reference=_text(arguments.get(CLIENT_REFERENCE_FIELD)),
                        payload_fingerprint=fingerprint(arguments), traceparent=_traceparent(headers, meta),
                        status=200)
        effects: list[dict[str, Any]] = []
        try:
            structured, row["outcome"] = await self._act(name, arguments, row, effects)
            result = _result(structured)
        except ToolError as error:
            row["outcome"] = error.outcome
            result = _error_result(error)
        self.ledger.record(row, effects)
        if scope is not None:
            scope[RECORDED] = True
        return result

    async def _act(self, name: str, arguments: dict[str, Any], row: dict[str, Any],
                   effects: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError("unknown_tool", f"no tool {name!r}; valid: {', '.join(self.tools)}")
        if tool.get("lookup"):
            reference = arguments.get(CLIENT_REFERENCE_FIELD)
            row["client_reference"] = _text(reference)
            visible_before = self.clock.now() - self.spec["lookup_lag_seconds"]
            items = self.ledger.find_resources(self.name, tool["lookup"], _text(reference), visible_before)
            return {LOOKUP_RESULT_FIELD: items}, "read"
        if not tool.get("effect"):
            return {"tool": name, "ok": True}, "read"
        return await self._commit(name, tool, arguments, row, effects)

    async def _commit(self, name: str, tool: dict[str, Any], arguments: dict[str, Any], row: dict[str, Any],
                      effects: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
        try:
            self.check_rate_limit()
        except RateLimited as limited:
            raise ToolError("rate_limited", f"too many requests; retry after {limited.retry_after} s",
                            "rate_limited") from None
        failure = self.next_failure()
        if failure and failure["fault"] == "rate_limited":
            raise ToolError("rate_limited", f"too many requests; retry after {failure['retry_after_seconds']} s",
                            "rate_limited")
        style = tool.get("idempotency") or "none"
        argument = {"argument": tool.get("idempotency_argument"), "natural_key": tool.get("natural_key")}.get(style)
        key = _text(arguments.get(argument)) if argument else None
        row["idempotency_key"] = key
        # the arguments a key stands for: all but the key itself (and the declared volatile ones)
        same = fingerprint({k: v for k, v in arguments.items() if k != argument}, ignore=self.spec["volatile_fields"])
        scoped = f"{name}|{key}" if key is not None else None  # keys are per tool
        if scoped is not None:
            try:  # a natural key names the resource whatever else the call says
                stored = self.stored_answer(scoped, same, same_payload=style == "argument")
            except KeyInUse:
                raise ToolError("idempotency_key_in_use", "a call with this key is still being processed") from None
            except KeyReused:
                raise ToolError("idempotent_parameter_mismatch",
                                f"{argument} {key!r} was already used with other arguments") from None
            if stored is not None:
                row["effect_ref"] = stored["effect_ref"]
                return json.loads(stored["body"]), "replayed"
        missing = [arg for arg in tool.get("required") or () if arguments.get(arg) in (None, "")]
        if missing:
            raise ToolError("missing_argument", f"missing required argument(s): {', '.join(missing)}")
        with self.processing(scoped, same, committed=lambda: bool(effects)):
            if self.spec["processing_delay_seconds"]:
                await asyncio.sleep(self.spec["processing_delay_seconds"])
            if failure and failure["fault"] == "error_before_commit":
                raise ToolError("internal_error", "the destination failed", "failed_before_commit")
            now = self.clock.now()
            number = self.ledger.next_number(self.name, name)
            rid = f"{_id_prefix(tool['effect'])}_{number:04d}"
            resource = {**arguments, "id": rid, "status": "created"}
            self.ledger.put_resource(self.name, name, rid, resource, now,
                                     client_reference=_text(arguments.get(CLIENT_REFERENCE_FIELD)))
            effects.append({"effect_ref": rid, "kind": tool["effect"], "params": arguments})
            row["effect_ref"] = rid
            if scoped is not None:  # the key names the committed resource, a failure after the commit too
                self.ledger.finish_key(self.name, scoped, 200, resource, rid, self.clock.now())
        if failure and failure["fault"] == "error_after_commit":
            raise ToolError("internal_error", "the destination failed", "failed_after_commit")
        return resource, "committed"


def _rpc_messages(raw: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST body (one, or a batch); none when it is not JSON-RPC."""
    try:
        doc = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return []
    items = doc if isinstance(doc, list) else [doc]
    return [m for m in items if isinstance(m, dict) and ("method" in m or "id" in m)]


def _traceparent(headers: dict[str, str], meta: Any) -> str | None:
    """The header, else the call's ``params._meta.traceparent`` (how an MCP client passes trace context)."""
    if headers.get(TRACEPARENT_HEADER):
        return headers[TRACEPARENT_HEADER]
    value = meta.get(TRACEPARENT_HEADER) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)
