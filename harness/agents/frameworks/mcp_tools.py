"""The framework agents' tool on an MCP tool server (contract ``transport: mcp``): the ``mcp`` package's own
streamable HTTP client inside the tool, one fresh session per call, and the audit events of each call written
here (docs/contract.md: an attempt is ``method: tools/call``, ``path: <tool>``, the key argument, the
fingerprint of the arguments; a lookup tool's call is an observation). harness.instrument is not used for
these calls: it logs HTTP requests, and would log a session's JSON-RPC POSTs (initialize, tools/list) as
attempts. ``McpOperation`` has the interface tools.py's correct tool reads (harness.instrument's Operation's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from harness.agents.frameworks import scope as framework_scope
from harness.contract import MCP_ENDPOINT
from harness.fingerprint import fingerprint
from harness.model.agent import (
    Attempt,
    Observation,
    closing_resolution,
    decide_resolution,
    derive_key,
    is_attempt,
    observations_since_last_attempt,
    retry_reason_after,
    traceparent,
)
from harness.recorder import Recorder, new_id

READ_TIMEOUT = 1.5  # seconds: the catalogue's client timeout (mcp_slow_result holds its answer 2.2 s)


class McpOperation:
    """One intent's operation on an MCP destination, logged as audit events through ``recorder``."""

    def __init__(self, recorder: Recorder, intent: dict[str, Any], contract: dict[str, Any], base_url: str,
                 max_attempts: int) -> None:
        self.recorder, self.intent, self.contract = recorder, intent, contract
        self.destination, self.kind = intent["destination"], intent["kind"]
        self.url = base_url.rstrip("/") + (contract.get("endpoint") or MCP_ENDPOINT)
        self.max_attempts = max_attempts
        self.operation_id = new_id("op")
        self.idempotency_key = derive_key(self.operation_id)
        self.history: list[Attempt | Observation] = []  # the tools/call attempts and lookups, in order
        self.last_fingerprint: str | None = None
        self.noted_decision: str | None = None  # next_retry's words, added to the next attempt's decision
        style = contract["idempotency"]["style"]
        declared = self.operation_id if style == "natural_key" else self.idempotency_key if style != "none" else None
        recorder.operation(self.operation_id, intent_id=intent["intent_id"], owner=recorder.session_id,
                           intent={k: intent[k] for k in ("kind", "destination", "params")},
                           idempotency_key=declared)

    @property
    def attempts(self) -> list[Attempt]:
        return [r for r in self.history if isinstance(r, Attempt)]

    @property
    def observations(self) -> list[Observation]:
        return [r for r in self.history if isinstance(r, Observation)]

    @property
    def last_attempt(self) -> Attempt | None:
        attempts = self.attempts
        return attempts[-1] if attempts else None

    @property
    def effect_refs(self) -> list[str]:
        """The effect refs the evidence names so far (harness.model's resolution)."""
        return decide_resolution(self.history).effect_refs

    @property
    def effect_ref(self) -> str | None:
        return self.effect_refs[0] if self.effect_refs else None

    @contextmanager
    def scope(self) -> Iterator[McpOperation]:
        try:
            with framework_scope.opened(self):
                yield self
        finally:
            self.resolve()

    def next_retry(self, decision: str) -> None:
        """Words for the next attempt's decision, added to what the records support (as harness.instrument's
        Operation.next_retry does): which layer ran the tool again, say."""
        self.noted_decision = decision

    # -- one tools/call ---------------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict[str, Any], key: str | None) -> tuple[Attempt, Any]:
        """One attempt through our own client (harness.agents.mcp_client), logged."""
        return asyncio.run(self.call_via(self.our_client, tool, arguments, key))

    def look_up(self) -> list[str] | None:
        """The lookup tool through our own client, logged as an observation (``look_up_via``)."""
        return asyncio.run(self.look_up_via(self.our_client))

    async def our_client(self, tool: str, arguments: dict[str, Any], traceparent: str) -> tuple[str, Any, str | None]:
        """One tools/call through a fresh session of our own client (harness.agents.mcp_client), the traceparent
        in ``params._meta``."""
        from harness.agents.mcp_client import call_tool

        state, result, cause = await call_tool(self.url, tool, arguments, traceparent=traceparent,
                                               read_timeout=READ_TIMEOUT)
        return state, result, None if cause is None else f"{type(cause).__name__}: {cause}"[:200]

    async def call_via(self, via: CallTool, tool: str, arguments: dict[str, Any], key: str | None
                       ) -> tuple[Attempt, Any]:
        """One attempt: a tools/call of ``tool`` made by ``via`` (our client, or a framework's own MCP adapter),
        logged; (the record, the ToolResult or None)."""
        sent_traceparent = traceparent(self.operation_id)
        record = Attempt(new_id("att"))
        state, result, error = await via(tool, arguments, sent_traceparent)
        record.dispatch_state = state
        if result is not None:
            record.http_status, record.tool_error = 200, result.is_error
            if not result.is_error:
                resource = result.resource
                field_name = self.contract["operations"][self.kind].get("effect_ref_field") or "id"
                if isinstance(resource, dict) and resource.get(field_name):
                    record.effect_refs = [str(resource[field_name])]
            else:
                error = result.text[:200]
        previous = self.last_attempt
        number = len(self.attempts) + 1
        retry: dict[str, Any] = {}
        noted, self.noted_decision = self.noted_decision, None
        if previous is not None:
            decision = self.decision(key)
            retry = {"retry_of_attempt_id": previous.attempt_id,
                     "retry_reason": retry_reason_after(previous.dispatch_state, previous.http_status,
                                                        tool_error=previous.tool_error),
                     "retry_decision": f"{decision}; {noted}" if noted else decision,
                     "prior_request_fingerprint": self.last_fingerprint}
        self.recorder.attempt(
            self.operation_id, record.attempt_id, state, attempt_number=number, destination=self.destination,
            method="tools/call", path=tool, idempotency_key=key, request_fingerprint=fingerprint(arguments),
            http_status=record.http_status, effect_refs=record.effect_refs or None, traceparent=sent_traceparent,
            error=error, tool_error=True if record.tool_error else None,
            attempt_budget_remaining=max(0, self.max_attempts - number), **retry)
        record.error = error
        self.history.append(record)
        self.last_fingerprint = fingerprint(arguments)
        return record, result

    async def look_up_via(self, via: CallTool) -> list[str] | None:
        """The lookup tool by client reference, called by ``via`` and logged as an observation: the refs found
        ([]: none), None when the tool did not answer (no evidence either way)."""
        spec = self.contract.get("lookup")
        if not spec:
            return None
        observation = Observation(new_id("obs"), "lookup")
        state, result, error = await via(spec["path"], {spec["query_param"]: self.operation_id},
                                         traceparent(self.operation_id))
        body = result.resource if result is not None and not result.is_error else None
        field_name = self.contract["operations"][self.kind].get("effect_ref_field") or "id"
        items = body.get(spec.get("result_field") or "items") if isinstance(body, dict) else None
        if isinstance(items, list):
            observation.effect_refs = [str(i[field_name]) for i in items if isinstance(i, dict) and field_name in i]
            observation.found = bool(observation.effect_refs)
            observation.lag_possible = False if observation.found is False else None
        self.recorder.observation(self.operation_id, observation.observation_id, source="lookup",
                                  method="tools/call", path=spec["path"], found=observation.found,
                                  effect_refs=observation.effect_refs or None, lag_possible=observation.lag_possible,
                                  detail=error or state if result is None else None)
        self.history.append(observation)
        return observation.effect_refs if observation.found is not None else None

    def decision(self, key: str | None) -> str:
        if any(is_attempt(r) for r in self.history) and \
                any(o.found is False for o in observations_since_last_attempt(self.history)):
            return "retry: reconciliation lookup found no effect after waiting out index lag"
        if key and self.contract["idempotency"]["style"] != "none":
            return "retry: destination deduplicates this idempotency key and it is within retention"
        return "retry with no deduplication in force and no observation since the unknown attempt"

    def resolve(self) -> None:
        """The state the evidence supports (harness.model's resolution, as tools.py's HTTP scopes write it)."""
        if not self.history:
            return
        state, refs, evidence, reason = closing_resolution(self.history)
        extra: dict[str, Any] = {}
        if state == "duplicate_effect_confirmed":  # the correction is a new operation, waiting for an operator
            correction = new_id("op")
            self.recorder.operation(correction, intent={"kind": "compensate_duplicate", "destination": self.destination,
                                                        "params": {"effect_refs": refs[1:]}},
                                    correction_of_operation_id=self.operation_id, owner="operator")
            extra["correction_operation_id"] = correction
        self.recorder.resolution(self.operation_id, state, effect_refs=refs or None, evidence=evidence, reason=reason,
                                 **extra)


class CallTool(Protocol):
    """How an operation's tools/call is made: ``(tool, arguments, traceparent)`` -> (dispatch state, the
    ToolResult or None, what went wrong). Our own client (``McpOperation.our_client``), or a framework's MCP adapter."""

    def __call__(self, tool: str, arguments: dict[str, Any], traceparent: str, /
                 ) -> Awaitable[tuple[str, Any, str | None]]: ...
