"""A generic destination: any HTTP API a scenario declares route by route (``api:``).

It is the shared HTTP core (``HttpDestination``: rate limit, declared failures, idempotency keys,
processing delay, the ledger) with the service's fixed parts taken from the declaration instead:
which route a request reaches (method, path template, ``match`` on params), how its body is read
(JSON, form, AWS query), where its key travels and how key misuse is answered, what a commit answers
(rendered templates, JSON or XML) and what an error looks like. The declaration arrives as the plain
dict ``ApiSpec.model_dump()`` (validated in the harness; this process skips pydantic).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from fake_destinations.http import HttpDestination, KeyContract
from fake_destinations.request_schema import Violations, violations_of
from fake_destinations.services import CREATE, Operation
from fake_destinations.templates import find, looks_like_xml, nest, read_param, render_body, render_text
from harness.contract import path_template_pattern

_FORM_FORMATS = ("form", "aws_query")


class _Route:
    def __init__(self, name: str, route: dict[str, Any]) -> None:
        self.name, self.decl = name, route
        self.method: str = route["method"]
        self.pattern: re.Pattern[str] = path_template_pattern(route["path"])
        self.match: dict[str, str] = route.get("match") or {}
        self.op = Operation(name, self.method, route["path"], CREATE, route.get("commits") or "",
                            tuple(route.get("required") or ()))
        self.read_param = read_param(route["path"]) or "id"  # a reads route has one (checked by its declaration)


class ApiDestination(HttpDestination):
    def configure(self, spec: dict[str, Any]) -> None:
        super().configure(spec)
        self.api: dict[str, Any] = spec["api"]
        # a literal segment is more specific than a placeholder: /items/search before /items/{id}
        self.api_routes = sorted((_Route(name, route) for name, route in self.api["routes"].items()),
                                 key=lambda r: r.decl["path"].count("{"))
        self.client_reference_field = self.api.get("client_reference_field") or ""
        self.violations: dict[str, Violations] = {
            name: violations_of(route["request_schema"], self.api.get("schema_dialect") or "openapi-3.1",
                                form=self.api["request_format"] in _FORM_FORMATS)
            for name, route in self.api["routes"].items() if route.get("request_schema") is not None}

    # -- which route, which params -----------------------------------------------------------

    async def dispatch(self, request: web.Request, row: dict[str, Any], effects: list[dict[str, Any]],
                       headers: dict[str, str]) -> tuple[int, Any, str]:
        row["request_id"] = f"req_{uuid.uuid4().hex[:20]}"
        on_path = [(r, m) for r in self.api_routes if (m := r.pattern.match(request.path))]
        if not on_path:
            raise self.reject(404, "not_found", f"no route {request.method} {request.path}")
        candidates = [(r, m) for r, m in on_path if r.method == request.method]
        if not candidates:
            allowed = sorted({r.method for r, _ in on_path})
            raise self.reject(405, "method_not_allowed",
                              f"{request.method} {request.path}; allowed: {', '.join(allowed)}")
        params: dict[str, Any] | None = None
        if any(r.match for r, _ in candidates):
            params = {**request.query, **self.parse_body(request, await request.read())}
        chosen = next(((r, m) for r, m in candidates
                       if params is None or all(str(params.get(k)) == v for k, v in r.match.items())), None)
        if chosen is None:
            wanted = "; ".join(", ".join(f"{k}={v}" for k, v in r.match.items()) for r, _ in candidates)
            raise self.reject(400, "unknown_operation",
                              f"{request.method} {request.path} serves requests with {wanted}")
        route, match = chosen
        decl = route.decl
        if decl.get("commits"):
            return await self.write(request, route.op, match.groupdict(), row, effects, headers)
        if decl.get("reads"):
            rid = match[route.read_param]
            item = self.ledger.get_resource(self.name, decl["reads"], rid)
            if item is None:
                raise self.reject(404, "not_found", f"no {decl['reads']} resource {rid!r}")
            return 200, nest(decl.get("wrap"), item), "read"
        if decl.get("lookup"):
            ref = request.query.get(decl["query_param"])
            row["client_reference"] = ref
            visible_before = self.clock.now() - self.spec["lookup_lag_seconds"]
            items = self.ledger.find_resources(self.name, decl["lookup"], ref, visible_before)
            return 200, {decl["result_field"]: items}, "read"
        response = decl.get("response") or {}
        values = self._values(row, None)
        headers.update(self._headers(response, values, {}))
        return response.get("status", 200), render_body(response.get("body"), values, {}), "read"

    def parse_body(self, request: web.Request, raw: bytes) -> dict[str, Any]:
        if self.api["request_format"] in _FORM_FORMATS:
            return self.request_body(request, raw)
        return {**request.query, **self.request_body(request, raw)}

    def request_body(self, request: web.Request, raw: bytes) -> dict[str, Any]:
        """The body's params alone (no query, no path params): what a request schema describes."""
        if self.api["request_format"] in _FORM_FORMATS:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise self.reject(400, "invalid_request", "the form body is not UTF-8") from None
            # a repeated field keeps its last value, as most form readers do
            return dict(parse_qsl(text, keep_blank_values=True))
        return super().parse_body(request, raw)

    def refuse_invalid(self, request: web.Request, op: Operation, params: dict[str, Any], raw: bytes) -> None:
        violations = self.violations.get(op.kind)
        if violations is not None:
            found = violations(self.request_body(request, raw))
            if found:
                raise self.reject(self.api["routes"][op.kind].get("invalid_status") or 400, "invalid_request",
                                  "the request breaks the API's request schema: " + "; ".join(found))
        super().refuse_invalid(request, op, params, raw)

    def keys_for(self, op: Operation) -> KeyContract:
        decl = self.api["routes"][op.kind].get("idempotency") or self.api["idempotency"]
        return KeyContract(style=decl["style"], header=decl.get("header") or "",
                           field=decl.get("field") or "", replay_headers=dict(decl.get("replay_headers") or {}),
                           mismatch_status=decl.get("mismatch_status") or 422,
                           mismatch_code=decl.get("mismatch_code") or "idempotency_key_reused",
                           in_progress_status=decl.get("in_progress_status") or 409,
                           account_header=decl.get("account_header") or "")

    # -- answers -------------------------------------------------------------------------------

    def commit(self, op: Operation, params: dict[str, Any], row: dict[str, Any], effects: list[dict[str, Any]],
               failure: dict[str, Any] | None, headers: dict[str, str]) -> tuple[int, Any, str]:
        if failure and failure["fault"] == "error_before_commit":
            return *self.failed(failure, headers), "failed_before_commit"
        decl = self.api["routes"][op.kind]
        number = self.ledger.next_number(self.name, "api")
        values = self._values(row, number)
        rid = render_text(decl["id_format"], values, params)
        values["id"] = int(rid) if decl.get("id_type") == "integer" else rid
        response = decl["response"]
        body = render_body(response.get("body"), values, params)
        headers.update(self._headers(response, values, params))
        # what reads and lookups answer: the resource the answer holds ({ticket: {...}} holds a ticket)
        resource = find(body, decl["resource"]) if decl.get("resource") else body
        self.ledger.put_resource(self.name, op.kind, rid, resource, self.clock.now(),
                                 client_reference=params.get(self.client_reference_field))
        effects.append({"effect_ref": rid, "kind": op.effect_kind, "params": params})
        row["effect_ref"] = rid
        return response.get("status", 200), body, "committed"

    def error_answer(self, status: int, code: str, message: str, headers: dict[str, str], **extra: Any) -> Any:
        errors = self.api["errors"]
        values = {"status": status, "code": code, "message": message, "request_id": f"req_{uuid.uuid4().hex[:20]}"}
        headers.update({k: render_text(v, values, {}) for k, v in (errors.get("headers") or {}).items()})
        if errors.get("content_type"):
            headers["Content-Type"] = errors["content_type"]
        return render_body(errors["body"], values, {})

    def respond(self, status: int, body: Any, headers: dict[str, str]) -> web.Response:
        declared = next((headers.pop(k) for k in list(headers) if k.lower() == "content-type"), None)
        if isinstance(body, str):
            content_type = declared or ("text/xml" if looks_like_xml(body) else "text/plain")
            kind, _, rest = content_type.partition(";")
            charset = rest.partition("charset=")[2].strip() or "utf-8"
            return web.Response(status=status, text=body, content_type=kind.strip(), charset=charset,
                                headers=headers)
        kind = (declared or "application/json").partition(";")[0].strip()
        return web.Response(status=status, text=json.dumps(body), content_type=kind, headers=headers)

    def _values(self, row: dict[str, Any], number: int | None) -> dict[str, Any]:
        return {"id": None, "n": number, "now": int(self.clock.now()), "request_id": row.get("request_id"),
                "key": row.get("idempotency_key")}

    @staticmethod
    def _headers(response: dict[str, Any], values: dict[str, Any], params: dict[str, Any]) -> dict[str, str]:
        out = {k: render_text(v, values, params) for k, v in (response.get("headers") or {}).items()}
        if response.get("content_type"):
            out["Content-Type"] = response["content_type"]
        return out
