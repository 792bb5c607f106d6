"""A generic destination inferred from an OpenAPI 3.0 or 3.1 document: the ``api:`` declaration the fake serves,
with every inference said and overridable (docs/destinations.md, "From an OpenAPI document").

The document is read as YAML (JSON is YAML too) within the harness's bounds, validated by openapi-spec-validator,
and its ``$ref``s resolved by ``referencing`` (never by hand): each one is checked first, so that an unresolvable
one is named with its place. Then the inference, on schemas with their ``$ref``s inlined:

- writes: a POST (or a PUT on a collection) answering 2xx with an id-like field (``id``, ``*_id``, ``*Id``, nested
  too: ``body.ticket.id``); its object is the stored resource, its request schema what the fake checks;
- reads: a GET on the write's path plus one path param; lookups: a GET on the write's path whose query param
  filters by a field the write sets; idempotency: an ``Idempotency-Key``-like header param of the write;
- the errors' shape from a declared 4xx/default answer, the base path from ``servers[0]``.

Anything ambiguous that matters is an ``OpenApiError`` naming the candidates and the override that settles it;
what can be left out (a lookup) is left out with its reason, as an ``Inference``. The document's reading is
``harness.openapi_document``, its schemas' ``harness.openapi_schemas``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fake_destinations.api_spec import ApiSpec
from harness.errors import OpenApiError
from harness.openapi_document import OpenApiDocument, prefix
from harness.openapi_schemas import (
    CLIENT_REFERENCE_NAMES,
    IDEMPOTENCY_HEADER_NAME,
    MESSAGE_FIELDS,
    answer_template,
    error_template,
    id_candidates,
    merged_schema,
    noun_of,
    schema_type,
    snake,
)
from harness.yaml_files import dotted, line_of, validation_lines

__all__ = ["Inference", "InferredApi", "OpenApiError", "OpenApiOverrides", "api_from_openapi", "profile_yaml"]

WRITE_METHODS = ("post", "put")
# query params that page or sort a list, never filter it by a client reference
PAGING_PARAMS = {"limit", "offset", "page", "per_page", "page_size", "pagesize", "cursor", "after", "before",
                 "starting_after", "ending_before", "sort", "order", "order_by", "direction", "expand", "fields",
                 "include", "q", "query", "search"}
CLIENT_REFERENCE_WORDS = re.compile(r"client[ _-]?reference|idempoten|external (id|identifier|reference)|"
                                    r"your own (id|identifier|reference)", re.IGNORECASE)
SET_IN_CONFIGURATION = "set in the configuration"


@dataclass(frozen=True)
class Inference:
    """One thing inferred (or set by an override): the key it set, its value, and why."""

    where: str
    value: Any
    why: str


@dataclass(frozen=True)
class InferredApi:
    """What a document says: the ``api:`` declaration, how it was inferred, and what intents and the configuration
    need beside it."""

    declaration: dict[str, Any]
    inferences: tuple[Inference, ...]
    operations: dict[str, str]
    base_path: str
    destination_options: dict[str, Any] = field(default_factory=dict)


# -- overrides ------------------------------------------------------------------------------------------------

class IdempotencyOverride(BaseModel):
    model_config = ConfigDict(extra="forbid")
    style: Literal["none", "stripe", "ietf"] = Field(description="none, stripe (optional key header) or ietf "
                                                                 "(the key header required).")
    header: str | None = Field(None, min_length=1, description="The header carrying the key (stripe, ietf).")


class OpenApiOverrides(BaseModel):
    """What a configuration may say over the inference (the keys of a destination's table beside ``openapi``)."""

    model_config = ConfigDict(extra="forbid")
    idempotency: IdempotencyOverride | None = Field(None, description="The writes' idempotency contract.")
    client_reference: str | None = Field(None, min_length=1, description="The request field that is the client "
                                                                         "reference (e.g. external_id).")
    lookup: str | None = Field(None, min_length=1, description="The lookup operation: an operationId or "
                                                               "'GET /path' (as the document writes it).")
    lookup_param: str | None = Field(None, min_length=1, description="The lookup's query param holding the client "
                                                                     "reference.")
    effect_ref: dict[str, str] = Field(default_factory=dict, description="Per write (operationId, 'POST /path' or "
                                       "route name): where its answer shows the new id, e.g. body.ticket.id.")
    writes: list[str] | None = Field(None, description="Only these operations (operationId or 'POST /path') are "
                                                       "writes.")
    retention_seconds: float | None = Field(None, ge=0, description="How long the destination remembers a key.")
    lookup_lag_seconds: float | None = Field(None, ge=0, description="How long a new resource stays invisible to "
                                                                     "lookups.")


def _overrides(overrides: Mapping[str, Any] | None, where: str) -> OpenApiOverrides:
    try:
        return OpenApiOverrides.model_validate(dict(overrides or {}))
    except ValidationError as exc:
        lines = [f"{prefix(where)}{dotted(loc) or '(top level)'}: {message}"
                 for loc, message in validation_lines(exc, OpenApiOverrides)]
        raise OpenApiError("\n".join(lines)) from None


# -- the inference ----------------------------------------------------------------------------------------------

@dataclass
class _Write:
    name: str
    method: str
    path: str  # as the document writes it
    op: dict[str, Any]
    loc: tuple[Any, ...]
    route: dict[str, Any]
    noun: str
    request_fields: dict[str, dict[str, Any]]  # the required ones, by name: their schemas
    resource: tuple[str, ...]


class _Inference:
    def __init__(self, doc: OpenApiDocument, overrides: OpenApiOverrides) -> None:
        self.doc, self.overrides = doc, overrides
        self.inferences: list[Inference] = []
        self.routes: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, str] = {}
        self.api: dict[str, Any] = {}

    def said(self, where: str, value: Any, why: str) -> None:
        inference = Inference(where, value, why)
        if inference not in self.inferences:  # each write may find the same (no error schema): said once
            self.inferences.append(inference)

    def run(self) -> InferredApi:
        base_path = self.base_path()
        self.api["base_path"] = base_path
        self.api["schema_dialect"] = f"openapi-{self.doc.version}"
        self.security()
        writes = self.writes(base_path)
        self.reads(writes, base_path)
        self.lookup(writes, base_path)
        self.api["routes"] = self.routes
        declaration = {"request_format": self.api.get("request_format", "json"), **self.api}
        options = {}
        for key in ("retention_seconds", "lookup_lag_seconds"):
            value = getattr(self.overrides, key)
            if value is not None:
                options[key] = value
                self.said(f"destination_options.{key}", value, SET_IN_CONFIGURATION)
        try:
            ApiSpec.model_validate(declaration)
        except ValidationError as exc:
            problems = "; ".join(f"{dotted(loc)}: {message}" for loc, message in validation_lines(exc, ApiSpec))
            raise self.doc.error((), f"the declaration inferred from it does not hold: {problems}") from None
        return InferredApi(declaration, tuple(self.inferences), self.operations, base_path, options)

    # -- the parts ----------------------------------------------------------------------------------------------

    def base_path(self) -> str:
        servers = self.doc.data.get("servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
            self.said("base_path", "", "the document declares no servers: its paths are the wire paths")
            return ""
        url = str(servers[0].get("url", ""))
        variables = _mapping(servers[0], "variables")
        for name, variable in variables.items():
            default = variable.get("default") if isinstance(variable, dict) else None
            url = url.replace("{" + name + "}", str(default or ""))
        path = urlparse(url).path if "//" in url else url.split("?", 1)[0]
        path = "/" + quote(path.strip("/"), safe="/-._~") if path.strip("/") else ""
        self.said("base_path", path, f"the path of servers[0].url {url!r}" if path else
                  f"servers[0].url {url!r} has no path: the document's paths are the wire paths")
        return path

    def security(self) -> None:
        schemes = (self.doc.data.get("components") or {}).get("securitySchemes")
        if not isinstance(schemes, dict) or not schemes:
            return
        kinds = {}
        for name, scheme in schemes.items():
            scheme, _ = self.doc.deref(scheme, ("components", "securitySchemes", name))
            if isinstance(scheme, dict):
                kind = str(scheme.get("type"))
                detail = scheme.get("scheme") or (f"{scheme.get('in')} {scheme.get('name')}" if kind == "apiKey"
                                                  else "")
                kinds[name] = f"{kind} {detail}".strip()
        self.said("security", kinds, "the fake accepts whatever credentials these schemes ask for (it checks none): "
                                     "an agent sends its own, the harness's secrets, or none")

    def operations_of(self) -> Iterator[tuple[str, str, dict[str, Any], list[Any], tuple[Any, ...]]]:
        """(method, path, operation, its parameters with the path item's, place) of every operation."""
        paths = self.doc.data.get("paths") or {}
        for path, item in paths.items():
            item, _ = self.doc.deref(item, ("paths", path))
            if not isinstance(item, dict):
                continue
            shared = _list(item, "parameters")
            for method in ("get", "put", "post", "patch", "delete"):
                op = item.get(method)
                if isinstance(op, dict):
                    own = _list(op, "parameters")
                    params = [self.doc.deref(p, ("paths", path, method, "parameters"))[0] for p in shared + own]
                    yield method, path, op, [p for p in params if isinstance(p, dict)], ("paths", path, method)

    def names_of(self, method: str, path: str, op: dict[str, Any]) -> tuple[str, ...]:
        op_id = op.get("operationId")
        return (*((op_id,) if isinstance(op_id, str) else ()), f"{method.upper()} {path}")

    def writes(self, base_path: str) -> list[_Write]:
        chosen = set(self.overrides.writes) if self.overrides.writes is not None else None
        if chosen is not None:
            self.said("writes", sorted(chosen), SET_IN_CONFIGURATION)
        writes: list[_Write] = []
        tried: list[str] = []
        for method, path, op, params, loc in self.operations_of():
            names = self.names_of(method, path, op)
            if method not in WRITE_METHODS or (chosen is not None and not chosen & set(names)):
                continue
            if method == "put" and path.rstrip("/").endswith("}"):
                continue  # a PUT on an item replaces it: an update, not a creation
            tried.append(names[-1])
            write = self.write(method, path, op, params, loc, base_path)
            if write is not None:
                writes.append(write)
        if chosen is not None:
            unknown = sorted(chosen - set(self.operations) - set(self.routes))
            if unknown:
                raise OpenApiError(f"{prefix(self.doc.where)}writes: {', '.join(map(repr, unknown))} name no POST or "
                                   f"PUT that answers 2xx with an id-like field in {self.doc.path} (valid: "
                                   f"{', '.join(tried) or 'none'})")
        if not writes:
            raise self.doc.error(("paths",), "no POST or PUT answers 2xx with an id-like field, so nothing here is a "
                                 "write the harness can count; valid writes look like `POST /tickets` answering 201 "
                                 "with a schema holding `id` (or `ticket: {id: ...}`)"
                                 + (f" (POST/PUT seen: {', '.join(tried)})" if tried else " (none has a POST or PUT)")
                                 + ("; its webhooks are requests the API sends, never writes it serves"
                                    if self.doc.data.get("webhooks") else ""))
        return writes

    def write(self, method: str, path: str, op: dict[str, Any], params: list[Any], loc: tuple[Any, ...],
              base_path: str) -> _Write | None:
        names = self.names_of(method, path, op)
        answer = self.json_answer(op, loc, 200, 299)
        if answer is None:
            return None
        status, schema, schema_name, schema_loc = answer
        noun = noun_of(path)
        name = snake(names[0]) or snake(f"{method} {path}") or method
        route_where = f"routes.{name}"
        if name in self.routes:
            raise self.doc.error(loc, f"two operations make the route name {name!r}: give each its own operationId")
        override = next((self.overrides.effect_ref[n] for n in (*names, name) if n in self.overrides.effect_ref),
                        None)
        if override is not None:
            id_path = tuple(override.removeprefix("body.").split("."))
            found = [c for c in id_candidates(schema, "") if c[2] == ".".join(id_path)] or \
                [c for c in self.any_field(schema, id_path)]
            if not override.startswith("body.") or not found:
                raise OpenApiError(f"{prefix(self.doc.where)}effect_ref.{names[0]}: {override!r} names no field of "
                                   f"the {status} answer of {names[-1]} in {self.doc.path} (valid: body.<dotted "
                                   "path>, e.g. " + ", ".join(f"body.{c[2]}" for c in id_candidates(schema, noun))
                                   + ")")
            id_type = found[0][3]
            self.said(f"{route_where}.effect_ref", override, SET_IN_CONFIGURATION)
        else:
            candidates = id_candidates(schema, noun)
            if not candidates:
                return None
            best = [c for c in candidates if c[:2] == candidates[0][:2]]
            if len(best) > 1:  # the resource's own object breaks a tie: {ticket: {id}, audit: {id}}
                own = [c for c in best if c[2].rsplit(".", 2)[0].split(".")[-1].lower() == noun]
                best = own if len(own) == 1 else best
            if len(best) > 1:
                raise self.doc.error(schema_loc, f"the {status} answer of {names[-1]} has several id-like fields: "
                                     f"{', '.join('body.' + c[2] for c in best)}; say which one names the new "
                                     f"resource with the override effect_ref = {{{names[0]} = \"body.{best[0][2]}\"}}")
            _, _, dotted, id_type = best[0]
            id_path = tuple(dotted.split("."))
            others = [f"`{c[2]}`" for c in candidates if c[2] != dotted]
            self.said(f"{route_where}.effect_ref", f"body.{dotted}",
                      f"{status} answer schema{' ' + schema_name if schema_name else ''} has `{dotted}` ({id_type}), "
                      + (f"the best id-like field (also: {', '.join(others)})" if others
                         else "the only id-like field"))
        route: dict[str, Any] = {"method": method.upper(), "path": base_path + path,
                                 "commits": f"{noun}_created" if noun else f"{name}_committed"}
        self.said(f"{route_where}.commits", route["commits"], f"{method.upper()} {path} answers {status} with an id: "
                                                               "a write, each one an effect")
        route["effect_ref"] = "body." + ".".join(id_path)
        if id_type == "integer":
            route["id_type"], route["id_format"] = "integer", "{n}"
        resource = id_path[:-1]
        if resource:
            route["resource"] = ".".join(resource)
            self.said(f"{route_where}.resource", route["resource"], "the object holding the id: what reads and "
                                                                    "lookups answer")
        request_fields = self.request(route, route_where, op, loc)
        self.idempotency(route, route_where, params, names[-1])
        route["response"] = {"status": status, "body": answer_template(schema, id_path, request_fields)}
        self.said(f"{route_where}.response", status, f"from the {status} answer's schema: its required properties, "
                                                     "the id, request fields echoed")
        self.errors(route, route_where, op, loc)
        self.routes[name] = route
        for key in names:
            self.operations[key] = name
        return _Write(name, method, path, op, loc, route, noun, request_fields, resource)

    def any_field(self, schema: Any, path: tuple[str, ...]) -> list[tuple[int, int, str, str]]:
        node: Any = schema
        for part in path:
            node = merged_schema(node)["properties"].get(part)
            if node is None:
                return []
        return [(0, len(path), ".".join(path), schema_type(merged_schema(node)) or "string")]

    def json_answer(self, op: dict[str, Any], loc: tuple[Any, ...], low: int, high: int
                    ) -> tuple[int, dict[str, Any], str | None, tuple[Any, ...]] | None:
        """The first answer with a status in [low, high] (or ``default`` past 399) and a JSON schema: (status,
        inlined schema, its component's name, place)."""
        responses = _mapping(op, "responses")
        for code in sorted(responses, key=lambda c: (c == "default", c)):
            status = 400 if code == "default" and low >= 400 else _status(code)
            if status is None or not low <= status <= high:
                continue
            answer, _ = self.doc.deref(responses[code], (*loc, "responses", code))
            content = answer.get("content") if isinstance(answer, dict) else None
            media = _json_media(content)
            if media is None:
                continue
            raw = _mapping(content, media).get("schema")
            if not isinstance(raw, dict):
                continue
            schema_loc = (*loc, "responses", code, "content", media, "schema")
            _, name = self.doc.deref(raw, schema_loc)
            inlined, _ = self.doc.inline(raw, schema_loc)
            return status, inlined, name, schema_loc
        return None

    def request(self, route: dict[str, Any], where: str, op: dict[str, Any], loc: tuple[Any, ...]
                ) -> dict[str, dict[str, Any]]:
        body, _ = self.doc.deref(op.get("requestBody"), (*loc, "requestBody"))
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, dict) or not content:
            self.said(f"{where}.request_schema", None, "the operation declares no request body")
            return {}
        media = _json_media(content)
        form = next((m for m in content if m.split(";")[0].strip() == "application/x-www-form-urlencoded"), None)
        chosen = media or form
        fmt = "json" if media else "form" if form else None
        if chosen is None or fmt is None:
            self.said(f"{where}.request_schema", None, f"its request body is {', '.join(content)}: neither JSON nor a "
                                                       "form, so not checked")
            return {}
        if "request_format" not in self.api:
            self.api["request_format"] = fmt
            self.said("request_format", fmt, f"the first write's request body is {chosen}")
        elif self.api["request_format"] != fmt:
            self.said(f"{where}.request_schema", None, f"its body is {chosen}, the api's request_format is "
                                                       f"{self.api['request_format']} (one per api)")
        raw = _mapping(content, chosen).get("schema")
        if not isinstance(raw, dict):
            return {}
        schema, notes = self.doc.inline(raw, (*loc, "requestBody", "content", chosen, "schema"))
        route["request_schema"] = schema
        self.said(f"{where}.request_schema", chosen, "the request body's schema, its $refs inlined"
                  + (f" ({'; '.join(notes)})" if notes else ""))
        merged = merged_schema(schema)
        required = [r for r in merged["required"] if isinstance(r, str)]
        if required:
            route["required"] = required
            self.said(f"{where}.required", required, "the request body schema's `required`")
        return {name: merged_schema(merged["properties"].get(name)) for name in required}

    def idempotency(self, route: dict[str, Any], where: str, params: list[Any], op_name: str) -> None:
        if self.overrides.idempotency is not None:
            decl = self.overrides.idempotency.model_dump(exclude_none=True)
            why = SET_IN_CONFIGURATION
        else:
            header = next((p for p in params if p.get("in") == "header"
                           and IDEMPOTENCY_HEADER_NAME.match(str(p.get("name", "")))), None)
            if header is None:
                decl = {"style": "none"}
                why = f"no idempotency header declared on {op_name}: every request commits"
            else:
                style = "ietf" if header.get("required") else "stripe"
                decl = {"style": style, "header": header["name"]}
                why = (f"{op_name} declares the header parameter {header['name']} "
                       + ("as required: a request without it is refused (400)" if style == "ietf"
                          else "as optional: a key, when sent, replays the first answer"))
        if "idempotency" not in self.api:
            self.api["idempotency"] = decl
            self.said("idempotency", decl, why)
        elif self.api["idempotency"] != decl:
            route["idempotency"] = decl
            self.said(f"{where}.idempotency", decl, why)

    def errors(self, route: dict[str, Any], where: str, op: dict[str, Any], loc: tuple[Any, ...]) -> None:
        declared = set(_mapping(op, "responses"))
        if "400" not in declared and "422" in declared:
            route["invalid_status"] = 422
            self.said(f"{where}.invalid_status", 422, "the operation declares 422 (not 400) for a request it refuses")
        if "errors" in self.api:
            return
        answer = self.json_answer(op, loc, 400, 499)
        template = error_template(answer[1]) if answer is not None else None
        if answer is None or template is None:
            self.said("errors.body", None, "no 4xx/default answer with a schema that has a message field: the fake's "
                                           "default error shape {error, message}" if answer is None else
                      f"the {answer[0]} answer's schema has no message-like field ({', '.join(MESSAGE_FIELDS)}): "
                      "the fake's default error shape")
            return
        self.api["errors"] = {"body": template}
        self.said("errors.body", template, f"the {answer[3][-4]} answer's schema"
                  + (f" {answer[2]}" if answer[2] else "") + ": code and message in its own fields")

    def reads(self, writes: list[_Write], base_path: str) -> None:
        for write in writes:
            for method, path, op, _, loc in self.operations_of():
                rest = path[len(write.path):] if path.startswith(write.path.rstrip("/") + "/") else ""
                if method != "get" or not re.fullmatch(r"/\{[^{}/]+\}", rest):
                    continue
                names = self.names_of(method, path, op)
                name = snake(names[0]) if len(names) > 1 else f"get_{write.noun or write.name}"
                if name in self.routes:
                    continue
                route: dict[str, Any] = {"method": "GET", "path": base_path + path, "reads": write.name}
                answer = self.json_answer(op, loc, 200, 200)
                why = f"GET {path}: {write.path} plus one path param reads what {write.name} made"
                if answer is not None:
                    candidates = [c for c in id_candidates(answer[1], write.noun) if c[0] < 2]
                    wrap = candidates[0][2].rsplit(".", 1)[0] if candidates and "." in candidates[0][2] else None
                    if wrap:
                        route["wrap"] = wrap
                        self.said(f"routes.{name}.wrap", wrap, f"its 200 answer holds the resource at `{wrap}`")
                self.routes[name] = route
                self.said(f"routes.{name}.reads", write.name, why)

    def lookup(self, writes: list[_Write], base_path: str) -> None:
        wanted = self.overrides.lookup
        for method, path, op, params, loc in self.operations_of():
            names = self.names_of(method, path, op)
            if wanted is not None and wanted not in names:
                continue
            write = next((w for w in writes if w.path == path), None) if wanted is None else \
                next((w for w in writes if w.path == path), writes[0])
            if method != "get" or write is None:
                continue
            where = f"routes.{snake(names[0]) if len(names) > 1 else 'find_' + (write.noun or write.name)}"
            found = self.lookup_of(write, path, op, params, loc, names[-1], where)
            if found is None:
                continue
            route, field_name = found
            route["path"] = base_path + path
            self.api["client_reference_field"] = field_name
            self.routes[where.removeprefix("routes.")] = route
            return
        if wanted is not None:
            raise OpenApiError(f"{prefix(self.doc.where)}lookup: {wanted!r} names no GET of {self.doc.path} that "
                               "lists a write's resources (valid: an operationId or 'GET /path' as the document "
                               "writes it)")
        if not any(i.where.startswith("lookup") for i in self.inferences):
            self.said("lookup", None, "no GET on a write's path filters by a query param the write sets: no lookup "
                                      "(say one with the override lookup = \"listTickets\" or \"GET /tickets\")")

    def lookup_of(self, write: _Write, path: str, op: dict[str, Any], params: list[Any], loc: tuple[Any, ...],
                  op_name: str, where: str) -> tuple[dict[str, Any], str] | None:
        answer = self.json_answer(op, loc, 200, 200)
        if answer is None or schema_type(merged_schema(answer[1])) != "object":
            self.said("lookup", None, f"{op_name} answers no JSON object (a bare list, or nothing): no lookup, the "
                                      "fake answers {field: [...]}")
            return None
        properties = merged_schema(answer[1])["properties"]
        lists = [n for n, sub in properties.items() if schema_type(merged_schema(sub)) == "array"]
        if len(lists) != 1:
            self.said("lookup", None, f"{op_name}'s answer has {'no list' if not lists else 'several lists: '}"
                                      f"{', '.join(lists)}: no lookup")
            return None
        queries = [p for p in params if p.get("in") == "query" and isinstance(p.get("name"), str)]
        wanted_param = self.overrides.lookup_param
        if wanted_param is None and any(p["name"] == self.overrides.client_reference for p in queries):
            wanted_param = self.overrides.client_reference  # the field the configuration names, filtered by name
        if wanted_param is not None:
            chosen = [p for p in queries if p["name"] == wanted_param]
            if not chosen:
                raise OpenApiError(f"{prefix(self.doc.where)}lookup_param: {wanted_param!r} is no query param of "
                                   f"{op_name} in {self.doc.path} (valid: "
                                   f"{', '.join(p['name'] for p in queries) or 'none'})")
            why = SET_IN_CONFIGURATION
        else:
            chosen = [p for p in queries if p["name"].lower() not in PAGING_PARAMS and (
                p["name"] in write.request_fields or p["name"].lower() in CLIENT_REFERENCE_NAMES
                or p["name"] in merged_schema(write.route.get("request_schema"))["properties"]
                or CLIENT_REFERENCE_WORDS.search(str(p.get("description") or "")))]
            if len(chosen) != 1:
                names = ", ".join(p["name"] for p in chosen) or "none"
                self.said("lookup", None, f"{op_name} lists {write.noun or write.name}s, and which query param filters "
                          f"by the client reference is {'unclear' if chosen else 'not said'} (candidates: {names}): "
                          "no lookup; say it with the override lookup_param (or client_reference)")
                return None
            why = (f"{op_name} lists {write.path} filtered by the query param {chosen[0]['name']}, a field "
                   f"{write.name} sets")
        query_param = chosen[0]["name"]
        field_name = self.overrides.client_reference or query_param
        self.said("client_reference_field", field_name, SET_IN_CONFIGURATION if self.overrides.client_reference
                  else f"the request field {write.name} sets and {op_name} filters by")
        route = {"method": "GET", "path": path, "lookup": write.name, "query_param": query_param,
                 "result_field": lists[0]}
        self.said(f"{where}.lookup", write.name, why)
        self.said(f"{where}.result_field", lists[0], f"the list in {op_name}'s answer")
        return route, field_name


def _mapping(node: Any, key: str) -> dict[str, Any]:
    """``node[key]`` when both are mappings, else empty: a validated document may still leave a key out."""
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, dict) else {}


def _list(node: Any, key: str) -> list[Any]:
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, list) else []


def _status(code: str) -> int | None:
    if re.fullmatch(r"[1-5]\d\d", code):
        return int(code)
    if re.fullmatch(r"[1-5]XX", code, re.IGNORECASE):
        return int(code[0]) * 100
    return None


def _json_media(content: Any) -> str | None:
    if not isinstance(content, dict):
        return None
    for media in content:
        kind = media.split(";")[0].strip().lower()
        if kind == "application/json" or kind.endswith("+json") or kind == "*/*":
            return media
    return None


# -- the public face --------------------------------------------------------------------------------------------

def api_from_openapi(path: Path, overrides: Mapping[str, Any] | None = None, *, where: str = "") -> InferredApi:
    """The ``api:`` declaration an OpenAPI 3.0/3.1 document at ``path`` describes, with its inferences;
    ``overrides`` say what the document cannot (``OpenApiOverrides``), ``where`` names the configuration's key in
    errors. Raises ``OpenApiError``."""
    chosen = _overrides(overrides, where)
    doc = OpenApiDocument(Path(path), where)
    try:
        return _Inference(doc, chosen).run()
    except RecursionError:
        raise doc.error((), "the document nests too deeply to infer from") from None


def profile_yaml(inferred: InferredApi, source: Path) -> str:
    """The declaration as YAML for review: each inference a comment above the key it set (the rest at the top).
    Loading it gives ``inferred.declaration`` back."""
    body = yaml.safe_dump(inferred.declaration, sort_keys=False, allow_unicode=True, width=110)
    lines = body.splitlines()
    root = yaml.compose(body)
    above: dict[int, list[str]] = {}
    header = [f"# The api declaration inferred from {source} (python -m harness api from-openapi).",
              "# Each inference is a comment above the key it set: review them; a configuration's overrides settle "
              "what is wrong.",
              f"# Intents name a write by: {', '.join(f'{k} -> {v}' for k, v in inferred.operations.items())}."]
    for option, value in inferred.destination_options.items():
        header.append(f"# Destination option (beside api:): {option}: {value}")
    for inference in inferred.inferences:
        loc = tuple(inference.where.split("."))
        line = line_of(root, loc) if loc[0] in inferred.declaration else 0
        text = inference.why if _set_here(inferred.declaration, loc) else \
            f"{inference.where}: {_one_line(inference.value)}: {inference.why}"
        text = " ".join(text.split())  # a comment is one line
        if line <= 1 and loc[0] not in ("request_format",):
            header.append(f"# {text}")
        else:
            above.setdefault(line, []).append(text)
    out = [*header]
    for number, text_line in enumerate(lines, start=1):
        indent = text_line[: len(text_line) - len(text_line.lstrip())]
        out += [f"{indent}# {text}" for text in above.get(number, [])]
        out.append(text_line)
    return "\n".join(out) + "\n"


def _set_here(declaration: dict[str, Any], loc: tuple[str, ...]) -> bool:
    node: Any = declaration
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _one_line(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
    return text if len(text) <= 120 else text[:117] + "..."
