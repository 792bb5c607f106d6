"""The framework agents' tool on an MCP tool server (contract ``transport: mcp``): the ``mcp`` package's own
streamable HTTP client inside the tool, one fresh session per call, and the audit events of each call written
here (docs/contract.md: an attempt is ``method: tools/call``, ``path: <tool>``, the key argument, the
fingerprint of the arguments; a lookup tool's call is an observation). harness.instrument is not used for
these calls: it logs HTTP requests, and would log a session's JSON-RPC POSTs (initialize, tools/list) as
attempts. ``McpOperation`` has the interface tools.py's correct tool reads (harness.instrument's Operation's).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from harness.agents.reference import tool_result, tool_text  # one reading of a tool result, the reference agent's
from harness.contract import MCP_ENDPOINT, TRACEPARENT_HEADER
from harness.fingerprint import fingerprint
from harness.recorder import Recorder, new_id

READ_TIMEOUT = 1.5  # seconds: the catalogue's client timeout (mcp_slow_result holds its answer 2.2 s)
OPEN: list[McpOperation] = []  # the scope open in this process (one intent at a time)


@dataclass
class Call:
    """An attempt or an observation as the tools read it (harness.instrument's AttemptRecord's fields)."""

    id: str
    ts: float
    dispatch_state: str | None = None
    http_status: int | None = None
    tool_error: bool = False
    effect_refs: list[str] = field(default_factory=list)
    found: bool | None = None

    @property
    def uncertain(self) -> bool:
        """It may have acted unseen: no result after the call was written, or an error result (which says
        the call failed, not that the tool did nothing first)."""
        return self.dispatch_state == "sent_no_response" or self.tool_error


class McpOperation:
    """One intent's operation on an MCP destination, logged as audit events through ``recorder``."""

    def __init__(self, recorder: Recorder, intent: dict[str, Any], contract: dict[str, Any], base_url: str,
                 max_attempts: int) -> None:
        self.recorder, self.intent, self.contract = recorder, intent, contract
        self.destination, self.kind = intent["destination"], intent["kind"]
        self.url = base_url.rstrip("/") + (contract.get("endpoint") or MCP_ENDPOINT)
        self.max_attempts = max_attempts
        self.operation_id = new_id("op")
        self.idempotency_key = "idem_" + hashlib.sha256(self.operation_id.encode()).hexdigest()[:24]
        self.attempts: list[Call] = []
        self.observations: list[Call] = []
        self.last_fingerprint: str | None = None
        style = contract["idempotency"]["style"]
        declared = self.operation_id if style == "natural_key" else self.idempotency_key if style != "none" else None
        recorder.operation(self.operation_id, intent_id=intent["intent_id"], owner=recorder.session_id,
                           intent={k: intent[k] for k in ("kind", "destination", "params")},
                           idempotency_key=declared)

    @property
    def last_attempt(self) -> Call | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def effect_refs(self) -> list[str]:
        found = [o for o in self.observations if o.found]
        return found[-1].effect_refs if found else (self.last_attempt.effect_refs if self.last_attempt else [])

    @property
    def effect_ref(self) -> str | None:
        return self.effect_refs[0] if self.effect_refs else None

    @contextmanager
    def scope(self) -> Iterator[McpOperation]:
        OPEN.append(self)
        try:
            yield self
        finally:
            OPEN.remove(self)
            self.resolve()

    # -- one tools/call ---------------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict[str, Any], key: str | None) -> tuple[Call, Any]:
        """One attempt: a tools/call of ``tool``, logged; (the record, the CallToolResult or None)."""
        traceparent = self.traceparent()
        record = Call(new_id("att"), time.time())
        state, result, error = asyncio.run(call_tool(self.url, tool, arguments, traceparent))
        record.dispatch_state = state
        if result is not None:
            record.http_status, record.tool_error = 200, bool(result.isError)
            if not result.isError:
                resource = tool_result(result)
                field_name = self.contract["operations"][self.kind].get("effect_ref_field") or "id"
                if isinstance(resource, dict) and resource.get(field_name):
                    record.effect_refs = [str(resource[field_name])]
            else:
                error = tool_text(result)[:200]
        previous = self.last_attempt
        number = len(self.attempts) + 1
        retry: dict[str, Any] = {}
        if previous is not None:
            retry = {"retry_of_attempt_id": previous.id, "retry_reason": retry_reason(previous),
                     "retry_decision": self.decision(key), "prior_request_fingerprint": self.last_fingerprint}
        self.recorder.attempt(
            self.operation_id, record.id, state, attempt_number=number, destination=self.destination,
            method="tools/call", path=tool, idempotency_key=key, request_fingerprint=fingerprint(arguments),
            http_status=record.http_status, effect_refs=record.effect_refs or None, traceparent=traceparent,
            error=error, tool_error=True if record.tool_error else None,
            attempt_budget_remaining=max(0, self.max_attempts - number), **retry)
        self.attempts.append(record)
        self.last_fingerprint = fingerprint(arguments)
        return record, result

    def look_up(self) -> list[str] | None:
        """The lookup tool by client reference, logged as an observation: the refs found ([]: none), None
        when the tool did not answer (no evidence either way)."""
        spec = self.contract.get("lookup")
        if not spec:
            return None
        observation = Call(new_id("obs"), time.time())
        state, result, error = asyncio.run(call_tool(self.url, spec["path"],
                                                     {spec["query_param"]: self.operation_id}, self.traceparent()))
        body = tool_result(result) if result is not None and not result.isError else None
        field_name = self.contract["operations"][self.kind].get("effect_ref_field") or "id"
        items = body.get(spec.get("result_field") or "items") if isinstance(body, dict) else None
        if isinstance(items, list):
            observation.effect_refs = [str(i[field_name]) for i in items if isinstance(i, dict) and field_name in i]
            observation.found = bool(observation.effect_refs)
        self.recorder.observation(self.operation_id, observation.id, source="lookup", method="tools/call",
                                  path=spec["path"], found=observation.found,
                                  effect_refs=observation.effect_refs or None,
                                  lag_possible=False if observation.found is False else None,
                                  detail=error or state if result is None else None)
        self.observations.append(observation)
        return observation.effect_refs if observation.found is not None else None

    def decision(self, key: str | None) -> str:
        if any(o.found is False for o in self.observations if self.last_attempt and o.ts >= self.last_attempt.ts):
            return "retry: reconciliation lookup found no effect after waiting out index lag"
        if key and self.contract["idempotency"]["style"] != "none":
            return "retry: destination deduplicates this idempotency key and it is within retention"
        return "retry with no deduplication in force and no observation since the unknown attempt"

    def traceparent(self) -> str:
        trace = hashlib.sha256(self.operation_id.encode()).hexdigest()[:32]
        return f"00-{trace}-{secrets.token_hex(8)}-01"

    def resolve(self) -> None:
        """The state the evidence supports, as tools.py's HTTP scopes write it."""
        last = self.last_attempt
        if last is None and not self.observations:
            return
        found = [o for o in self.observations if o.found and (last is None or o.ts >= last.ts)]
        if found:
            state, refs, evidence = "succeeded", found[-1].effect_refs, [found[-1].id]
            reason = "the lookup tool found the effect"
        elif last is not None and last.http_status == 200 and not last.tool_error:
            state, refs, evidence, reason = "succeeded", last.effect_refs, [last.id], "the tool returned its result"
        else:
            state, refs, evidence = "unknown", [], [c.id for c in [*self.attempts, *self.observations]]
            reason = "no result and nothing found: the call may have committed; escalating"
        self.recorder.resolution(self.operation_id, state, effect_refs=refs or None, evidence=evidence, reason=reason)


def retry_reason(previous: Call) -> str:
    if previous.dispatch_state == "not_sent":
        return "connection_not_established"
    return "destination_5xx" if previous.tool_error else "response_lost_after_dispatch"


async def call_tool(url: str, tool: str, arguments: dict[str, Any], traceparent: str) -> tuple[str, Any, str | None]:
    """One tools/call through a fresh MCP session: (dispatch state, the CallToolResult or None, error). Before
    the call is written nothing of it left (not_sent); once it is, a broken or late answer leaves it unknown."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    warnings.filterwarnings("ignore", "Use `streamable_http_client` instead", DeprecationWarning)
    calling = False
    try:
        async with streamablehttp_client(url, timeout=1.0 + READ_TIMEOUT, terminate_on_close=False) as (read, write, _):
            async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=READ_TIMEOUT)) as session:
                await session.initialize()
                calling = True
                result = await session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=READ_TIMEOUT),
                                                 meta={TRACEPARENT_HEADER: traceparent})
    except Exception as exc:  # noqa: BLE001 - an anyio task group raises an ExceptionGroup of anything
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # type: ignore[assignment]
        return ("sent_no_response" if calling else "not_sent"), None, f"{type(exc).__name__}: {exc}"[:200]
    return "response_received", result, None

