"""The shared HTTP core: one aiohttp app per destination, behaviour driven by its service declaration
and its spec (a plain dict, ``DestinationSpec.model_dump()``: the child process skips pydantic).

Order of checks on a write, as real APIs do it: rate limit, key presence, stored key (in progress ->
409, other payload -> 422 / mismatch, done -> replay), validation, processing, commit. Rate-limit
and validation answers are never stored under the key (the request did not start executing).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, NamedTuple

from aiohttp import web

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
from fake_destinations.services import ASYNC_STATUS_PATH, CREATE, CREATE_ASYNC, DELETE, SET_STATE, Operation
from harness.contract import (
    ACCOUNT_HEADER,
    CLIENT_REFERENCE_FIELD,
    CLIENT_TOKEN_FIELD,
    FLOW_HEADER,
    GATE_HEADER,
    IDEMPOTENCY_HEADER,
    LOOKUP_RESULT_FIELD,
    READ_PENDING,
    REPLAYED_HEADER,
    TRACEPARENT_HEADER,
    path_template_pattern,
)
from harness.fingerprint import fingerprint


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json",
                        headers=headers)


def _error(status: int, code: str, message: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    return status, {"error": code, "message": message, **extra}


class HttpDestination(DestinationRuntime):
    """One HTTP destination: routes every request through ``handle`` so that each one is recorded."""

    client_reference_field = CLIENT_REFERENCE_FIELD  # the request param a resource's client reference is read from

    def __init__(self, name: str, spec: dict[str, Any], ledger: Ledger, clock: Clock) -> None:
        super().__init__(name, spec, ledger, clock)
        s = self.service
        self.routes = [(op.method, path_template_pattern(op.path), op) for op in s.operations]
        self.item_pattern = path_template_pattern(s.collection + "/{id}")
        self.status_pattern = path_template_pattern(ASYNC_STATUS_PATH)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        received_at = self.clock.wall()
        row: dict[str, Any] = {
            "destination": self.name, "method": request.method, "path": request.path,
            "query": request.query_string or None, "flow_id": request.headers.get(FLOW_HEADER),
            "traceparent": request.headers.get(TRACEPARENT_HEADER), "received_at": received_at,
            "idempotency_key": None, "client_reference": None, "payload_fingerprint": None,
            "effect_ref": None, "kind": None, "params": None,
        }
        effects: list[dict[str, Any]] = []
        headers: dict[str, str] = {}
        gated = self.past_the_gate(request.headers.get(GATE_HEADER))
        if not gated or row["flow_id"] is None:  # not the proxy's: who sent it decides whether it is the agent's
            transport = request.transport
            row["sender"] = sender(transport.get_extra_info("peername"), transport.get_extra_info("sockname"),
                                   containers=self.agent_containers) if transport is not None else None
        if not gated:  # past the proxy: recorded, nothing done
            row["status"], row["outcome"] = UNGATED_STATUS, "rejected"
            self.ledger.record(row)
            return self.respond(UNGATED_STATUS, UNGATED_BODY, headers)
        try:
            status, body, outcome = await self.dispatch(request, row, effects, headers)
        except _Rejection as rejection:
            status, body, outcome = rejection.status, rejection.body, rejection.outcome
            headers.update(rejection.headers)
        row["status"], row["outcome"] = status, outcome
        self.ledger.record(row, effects)
        return self.respond(status, body, headers)

    async def dispatch(self, request: web.Request, row: dict[str, Any], effects: list[dict[str, Any]],
                       headers: dict[str, str]) -> tuple[int, Any, str]:
        """The answer to one request: (status, body, ledger outcome); ``headers`` collects its headers."""
        if request.method == "GET":
            row["client_reference"] = request.query.get(CLIENT_REFERENCE_FIELD)
            status, body = self.read(request)
            # a status poll that answered "still pending" is kept as such: it proves neither success nor absence
            pending = self.status_pattern.match(request.path) and isinstance(body, dict) \
                and body.get("status") == "pending"
            return status, body, READ_PENDING if pending else "read"
        for method, pattern, op in self.routes:
            match = pattern.match(request.path)
            if match and method == request.method:
                return await self.write(request, op, match.groupdict(), row, effects, headers)
        allowed = [m for m, p, _ in self.routes if p.match(request.path)]
        if allowed:
            raise self.reject(405, "method_not_allowed",
                              f"{request.method} {request.path}; allowed: {', '.join(allowed)}")
        raise self.reject(404, "not_found", f"no route {request.method} {request.path}")

    def respond(self, status: int, body: Any, headers: dict[str, str]) -> web.Response:
        return _json(status, body, headers)

    # -- what a generic destination declares, fixed for a built-in service ----------------------

    def reject(self, status: int, code: str, message: str, *, outcome: str = "rejected",
               headers: dict[str, str] | None = None, **extra: Any) -> _Rejection:
        """An error answer that ends the request (never stored under its key), in the destination's error shape."""
        out = dict(headers or {})
        return _Rejection(status, self.error_answer(status, code, message, out, **extra), outcome=outcome, headers=out)

    def error_answer(self, status: int, code: str, message: str, headers: dict[str, str], **extra: Any) -> Any:
        """The body of an error answer (``headers`` collects the headers it adds); ``extra`` fields are the
        built-in services' (a generic destination's errors have the shape its declaration gives them)."""
        return _error(status, code, message, **extra)[1]

    def keys_for(self, op: Operation) -> KeyContract:
        return _BUILT_IN_KEYS[self.spec["idempotency"]]

    def parse_body(self, request: web.Request, raw: bytes) -> dict[str, Any]:
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            raise self.reject(400, "invalid_json", "request body is not JSON") from None
        if not isinstance(body, dict):
            raise self.reject(400, "invalid_json", "request body must be a JSON object")
        return body

    # -- reads -------------------------------------------------------------------------------

    def read(self, request: web.Request) -> tuple[int, Any]:
        s = self.service
        if request.path == s.collection:
            if self.spec["lookup"] != "client_reference":
                return _error(404, "not_found", f"{s.name} offers no lookup")
            ref = request.query.get(CLIENT_REFERENCE_FIELD)
            visible_before = self.clock.now() - self.spec["lookup_lag_seconds"]
            items = self.ledger.find_resources(self.name, s.collection, ref, visible_before)
            return 200, {LOOKUP_RESULT_FIELD: items}
        match = self.item_pattern.match(request.path)
        if match:
            item = self.ledger.get_resource(self.name, s.collection, match["id"])
            if item is None:
                return _error(404, "not_found", f"no {s.collection.strip('/')} {match['id']!r}")
            return 200, item
        match = self.status_pattern.match(request.path)
        if match and any(op.action == CREATE_ASYNC for op in s.operations):
            operation = self.ledger.get_resource(self.name, "/operations", match["id"])
            if operation is None:
                return _error(404, "not_found", f"no operation {match['id']!r}")
            if operation["status"] == "pending" and self.clock.now() >= operation["completes_at"]:
                operation["status"] = "succeeded"
            return 200, {k: v for k, v in operation.items() if k != "completes_at"}
        return _error(404, "not_found", f"no route GET {request.path}")

    # -- writes ------------------------------------------------------------------------------

    async def write(self, request: web.Request, op: Operation, path_params: dict[str, str],
                    row: dict[str, Any], effects: list[dict[str, Any]],
                    headers: dict[str, str]) -> tuple[int, Any, str]:
        spec = self.spec
        keys = self.keys_for(op)
        style = keys.style
        raw = await request.read()
        params = {**op.body_defaults, **self.parse_body(request, raw), **path_params}
        row["kind"], row["params"] = op.kind, params
        row["client_reference"] = params.get(self.client_reference_field)
        row["payload_fingerprint"] = fingerprint(params, ignore=spec["volatile_fields"]) if params else None

        try:
            self.check_rate_limit()
        except RateLimited as limited:
            raise self.reject(429, "rate_limited", "too many requests", outcome="rate_limited",
                              headers={"Retry-After": str(limited.retry_after)}) from None
        failure = self.next_failure()
        if failure and failure["fault"] == "rate_limited":
            raise self.reject(failure["status"] or 429, "rate_limited", "too many requests", outcome="rate_limited",
                              headers={"Retry-After": str(failure["retry_after_seconds"]),
                                       **(failure.get("headers") or {})})

        key = None
        if style in ("stripe", "ietf"):
            key = request.headers.get(keys.header)
            if key is None and style == "ietf":
                raise self.reject(400, "idempotency_key_missing", f"this endpoint requires an {keys.header} header")
        elif style == "client_token":
            key = params.pop(keys.field, None)
            row["payload_fingerprint"] = fingerprint(params, ignore=spec["volatile_fields"])
        row["idempotency_key"] = key
        scoped = self.scoped_key(request, key, keys) if key is not None else None

        if scoped is not None:
            # a key is remembered retention_seconds after its first request completed (as Stripe stores it);
            # while that request is in progress it is in use (409), whatever the retention
            try:
                stored = self.stored_answer(scoped, row["payload_fingerprint"], expired=self.expired)
            except KeyInUse:
                raise self.reject(keys.in_progress_status, "idempotency_key_in_use",
                                  "a request with this key is still being processed") from None
            except KeyReused as reused:
                if style == "client_token":
                    raise self.reject(keys.mismatch_status, keys.mismatch_code,
                                      "the client token was already used with other parameters") from None
                raise self.reject(keys.mismatch_status, keys.mismatch_code,
                                  "the key was already used with another payload",
                                  first_payload_fingerprint=reused.first) from None
            if stored is not None:
                row["effect_ref"] = stored["effect_ref"]
                answer = json.loads(stored["body"])
                headers.update(answer["headers"])
                headers.update(keys.replay_headers)
                return stored["status"], answer["body"], "replayed"

        self.refuse_invalid(request, op, params, raw)

        with self.processing(scoped, row["payload_fingerprint"]):
            if spec["processing_delay_seconds"]:
                await asyncio.sleep(spec["processing_delay_seconds"])
            status, answer, outcome = self.commit(op, params, row, effects, failure, headers)
        # what the key remembers: the whole answer, so that a replay repeats its headers too (a generic
        # destination's). Stripe-like keys replay what the client got, a failure after the commit included;
        # a client token names a resource (EC2): it remembers the committed one, never an error
        remembered = (status, answer, dict(headers))
        acted = outcome in ("committed", "accepted_async") or (outcome == "replayed" and status < 400)  # a PUT
        if failure and failure["fault"] == "error_after_commit" and acted:  # that changed nothing still answers it
            error_headers: dict[str, str] = {}
            status, answer = self.failed(failure, error_headers)
            outcome = "failed_after_commit"
            headers.clear()
            headers.update(error_headers)
            if style != "client_token":
                remembered = (status, answer, dict(headers))
        if scoped is not None:
            if style == "client_token" and not effects:
                self.ledger.drop_key(self.name, scoped)
            else:
                self.ledger.finish_key(self.name, scoped, remembered[0],
                                       {"body": remembered[1], "headers": remembered[2]}, row["effect_ref"],
                                       self.clock.now())
        return status, answer, outcome

    def refuse_invalid(self, request: web.Request, op: Operation, params: dict[str, Any], raw: bytes) -> None:
        """Reject a write the destination would not execute (after the key checks, before any processing)."""
        missing = [name for name in op.required if params.get(name) in (None, "")]
        if missing:
            raise self.reject(400, "invalid_request", f"missing required field(s): {', '.join(missing)}",
                              required=list(op.required))

    def failed(self, failure: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        """The answer of a declared error_before_commit / error_after_commit."""
        status = failure["status"] or 500
        body = self.error_answer(status, "internal_error", "the destination failed", headers)
        headers.update(failure.get("headers") or {})  # the failure's own say over the api's usual error headers
        return status, body

    def commit(self, op: Operation, params: dict[str, Any], row: dict[str, Any], effects: list[dict[str, Any]],
               failure: dict[str, Any] | None, headers: dict[str, str]) -> tuple[int, Any, str]:
        """Act on a write: the answer of its success, or of a failure before the commit (``write`` turns a
        failure after the commit into its error answer)."""
        if failure and failure["fault"] == "error_before_commit":
            return *self.failed(failure, headers), "failed_before_commit"
        s = self.service
        now = self.clock.now()
        if op.action in (CREATE, CREATE_ASYNC):
            number = self.ledger.next_number(self.name, s.collection)
            rid = f"{s.id_prefix}_{number:04d}"
            resource = {"id": rid, **params, CLIENT_REFERENCE_FIELD: params.get(CLIENT_REFERENCE_FIELD),
                        "status": s.initial_status}
            self.ledger.put_resource(self.name, s.collection, rid, resource, now)
            effects.append({"effect_ref": rid, "kind": op.effect_kind, "params": params})
            row["effect_ref"] = rid
            status, answer, outcome = 201, resource, "committed"
            if op.action == CREATE_ASYNC:
                opn = f"opn_{self.ledger.next_number(self.name, '/operations'):04d}"
                self.ledger.put_resource(self.name, "/operations", opn, {
                    "id": opn, "status": "pending", "effect_ref": rid,
                    "completes_at": now + self.spec["async_completion_seconds"]}, now)
                answer = {**resource, "operation": {"id": opn, "status": "pending",
                                                    "status_url": ASYNC_STATUS_PATH.format(id=opn)}}
                status, outcome = 202, "accepted_async"
        elif op.action == SET_STATE:
            rid = params[op.required[0]]
            current = self.ledger.get_resource(self.name, s.collection, rid) or \
                {"id": rid, "status": s.initial_status, "version": 0}
            wanted = {k: v for k, v in params.items() if k not in (op.required[0], CLIENT_REFERENCE_FIELD)}
            changed = any(current.get(k) != v for k, v in wanted.items())
            if changed:
                current = {**current, **wanted, "version": current["version"] + 1}
                current["revision"] = f"{rid}@r{current['version']}"
                self.ledger.put_resource(self.name, s.collection, rid, current, now)
                effects.append({"effect_ref": current["revision"], "kind": op.effect_kind, "params": params})
            row["effect_ref"] = current.get("revision")
            if self.spec["put_notifies"]:
                ntf = f"ntf_{self.ledger.next_number(self.name, 'notifications'):04d}"
                effects.append({"effect_ref": ntf, "kind": "notification_sent"})
            status, answer = 200, current
            outcome = "committed" if effects else "replayed"
        elif op.action == DELETE:
            rid = params[op.required[0]]
            if self.ledger.get_resource(self.name, s.collection, rid) is None:
                return *_error(404, "not_found", f"no account {rid!r}"), "replayed"
            self.ledger.delete_resource(self.name, s.collection, rid)
            ref = f"{rid}@deleted"
            effects.append({"effect_ref": ref, "kind": op.effect_kind})
            row["effect_ref"] = ref
            status, answer, outcome = 200, {"id": rid, "deleted": True, "revision": ref}, "committed"
        else:  # pragma: no cover - declarations are checked by tests
            raise AssertionError(op.action)
        return status, answer, outcome

    def scoped_key(self, request: web.Request, key: str, keys: KeyContract) -> str:
        scope = self.spec["key_scope"]
        if scope == "account":
            return f"{request.headers.get(keys.account_header, '-')}|{key}"
        if scope == "path":
            return f"{request.method} {request.path}|{key}"
        return key

    def expired(self, created_at: float) -> bool:
        retention = self.spec["retention_seconds"]
        return retention is not None and self.clock.now() >= created_at + retention


class KeyContract(NamedTuple):
    """Where a write's idempotency key travels and how the destination answers its misuse."""

    style: str
    header: str = IDEMPOTENCY_HEADER
    field: str = CLIENT_TOKEN_FIELD
    replay_headers: dict[str, str] = {}  # noqa: RUF012 - a NamedTuple default, never mutated
    mismatch_status: int = 422
    mismatch_code: str = "idempotency_key_reused"
    in_progress_status: int = 409
    account_header: str = ACCOUNT_HEADER


_BUILT_IN_KEYS = {
    "none": KeyContract("none"),
    "stripe": KeyContract("stripe", replay_headers={REPLAYED_HEADER: "true"}),
    "ietf": KeyContract("ietf", replay_headers={REPLAYED_HEADER: "true"}),
    "client_token": KeyContract("client_token", mismatch_status=400, mismatch_code="IdempotentParameterMismatch"),
}


class _Rejection(Exception):
    """Ends a write early with an answer that is never stored under the idempotency key."""

    def __init__(self, status: int, body: Any, *, outcome: str = "rejected",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.outcome, self.headers = status, body, outcome, headers or {}
