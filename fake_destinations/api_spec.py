"""How a scenario declares a generic destination: any HTTP API, route by route (``api:``).

``ApiSpec`` validates the declaration (unknown keys, path templates, placeholders, effect ref paths
and self-contradicting contracts are errors naming the key); the destination process
(``fake_destinations.api``) serves the plain dict ``model_dump()`` gives. docs/destinations.md,
"Generic destinations", is the user's reference; a declaration may live in its own file, or be one
of the bundled profiles (``harness/apis/NAME.yaml``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fake_destinations.request_schema import schema_problem
from fake_destinations.services import IdempotencyStyle
from fake_destinations.templates import (
    ANSWER_NAMES,
    ERROR_NAMES,
    TemplateError,
    check,
    find,
    looks_like_xml,
    parse_xml,
    read_param,
    render_body,
    render_text,
)
from harness.contract import ACCOUNT_HEADER, CLIENT_TOKEN_FIELD, IDEMPOTENCY_HEADER, NAME_PATTERN, REPLAYED_HEADER

RequestFormat = Literal["json", "form", "aws_query"]
SchemaDialect = Literal["openapi-3.0", "openapi-3.1"]
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PATH_TEMPLATE = re.compile(r"^/(?:[^{}\s?#]*\{[A-Za-z_][A-Za-z0-9_]*\})*[^{}\s?#]*$")
ID_NAMES = ("n", "now", "request_id")
SAMPLE_ID = "ref_0000sample"  # the id rendered into a declared answer to check that its effect ref shows it
# what each style defaults to when the declaration says nothing (the built-in services' behaviour)
MISMATCH_DEFAULTS = {"stripe": (422, "idempotency_key_reused"), "ietf": (422, "idempotency_key_reused"),
                     "client_token": (400, "IdempotentParameterMismatch")}
DEFAULT_ERROR_BODY: dict[str, Any] = {"error": "{code}", "message": "{message}"}
AWS_ERROR_BODY = ("<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
                  "<RequestID>{request_id}</RequestID></Response>")


class ApiIdempotency(BaseModel):
    """How the routes that commit deduplicate: the style, and where the key travels."""

    model_config = ConfigDict(extra="forbid")
    style: IdempotencyStyle = Field(
        "none", description="none: every write commits; stripe: optional key header, first answer stored and "
        "replayed, other payload an error; ietf: like stripe, the key required (400 without); client_token: a "
        "body/form field, same token + params return the existing resource (EC2).")
    header: str | None = Field(None, description=f"stripe/ietf: the header carrying the key (default "
                                                 f"{IDEMPOTENCY_HEADER}).")
    field: str | None = Field(None, description=f"client_token: the body or form field carrying the token (default "
                                                f"{CLIENT_TOKEN_FIELD}).")
    replay_headers: dict[str, str] | None = Field(
        None, description=f"stripe/ietf: headers added to a replayed answer (default {REPLAYED_HEADER}: true).")
    mismatch_status: int | None = Field(None, ge=400, le=499, description="Same key, other payload: the status "
                                        "(default 422; client_token 400).")
    mismatch_code: str | None = Field(None, min_length=1, description="Same key, other payload: the error's {code} "
                                      "(default idempotency_key_reused; client_token IdempotentParameterMismatch).")
    in_progress_status: int = Field(409, ge=400, le=599, description="Same key while its first request is "
                                    "processing: the status.")
    account_header: str | None = Field(None, description=f"key_scope account: the header naming the account "
                                                         f"(default {ACCOUNT_HEADER}).")

    @model_validator(mode="after")
    def _consistent(self) -> ApiIdempotency:
        style = self.style
        keyed_by_header = style in ("stripe", "ietf")
        if self.header is not None and not keyed_by_header:
            raise ValueError(f"header {self.header!r} carries a key only for style stripe or ietf, not {style!r}"
                             + (" (a client_token travels in `field`)" if style == "client_token" else ""))
        if self.field is not None and style != "client_token":
            raise ValueError(f"field {self.field!r} carries a token only for style client_token, not {style!r}")
        if self.replay_headers is not None and not keyed_by_header:
            raise ValueError(f"replay_headers mark a replayed answer of style stripe or ietf; style {style!r} "
                             "replays none")
        if style == "none" and (self.mismatch_status is not None or self.mismatch_code is not None):
            raise ValueError("mismatch_status / mismatch_code answer a key reused with another payload; style "
                             "'none' has no keys")
        if keyed_by_header:
            self.header = self.header or IDEMPOTENCY_HEADER
            if self.replay_headers is None:
                self.replay_headers = {REPLAYED_HEADER: "true"}
        if style == "client_token":
            self.field = self.field or CLIENT_TOKEN_FIELD
        if style in MISMATCH_DEFAULTS:
            status, code = MISMATCH_DEFAULTS[style]
            self.mismatch_status = self.mismatch_status or status
            self.mismatch_code = self.mismatch_code or code
        self.account_header = self.account_header or ACCOUNT_HEADER
        for name, value in (self.replay_headers or {}).items():
            _check_template(value, (), f"replay_headers.{name}")
        return self


class ApiErrors(BaseModel):
    """How the API answers its own errors (declared failures, unknown routes, key errors, validation)."""

    model_config = ConfigDict(extra="forbid")
    content_type: str | None = Field(None, description="Default: application/json for a mapping body, "
                                                       "text/xml for a string.")
    body: Any = Field(None, description="Template of an error body: {code}, {message}, {status}, {request_id}. "
                                        "Default {error: '{code}', message: '{message}'}; aws_query the AWS XML "
                                        "error.")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers on every error answer "
                                                                      "(e.g. Stripe-Should-Retry).")


class ApiResponse(BaseModel):
    """A declared answer."""

    model_config = ConfigDict(extra="forbid")
    status: int = Field(200, ge=100, le=599)
    content_type: str | None = Field(None, description="Default: application/json for a mapping body, "
                                                       "text/xml for a string.")
    headers: dict[str, str] = Field(default_factory=dict, description="Header templates.")
    body: Any = Field(None, description="A JSON template (mapping, list) or a text/XML template (string).")


RouteName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)]


class ApiRoute(BaseModel):
    """One route: what it matches, and whether it commits an effect, reads one, looks them up, or answers."""

    model_config = ConfigDict(extra="forbid")
    method: str = Field(description="HTTP method: " + ", ".join(HTTP_METHODS) + ".")
    path: str = Field(description="Path template, e.g. /v1/payment_intents/{id}: {name} is one path segment.")
    match: dict[str, str] = Field(default_factory=dict, description="Request params that must equal these values "
                                                                    "(aws_query: {Action: RunInstances}).")
    commits: str | None = Field(None, min_length=1, description="The effect kind: each request that commits creates "
                                                                "a resource with a new {id}.")
    reads: str | None = Field(None, description="Name of a route that commits: answers its stored answer for {id}.")
    lookup: str | None = Field(None, description="Name of a route that commits: lists its resources whose client "
                                                 "reference equals the query parameter.")
    query_param: str | None = Field(None, description="lookup: the query parameter holding the client reference "
                                                      "(default client_reference).")
    result_field: str | None = Field(None, description="lookup: the answer's field listing the resources "
                                                       "(default items).")
    id_format: str | None = Field(None, description="commits: the new resource's id: {n} (numbered per "
                                                    "destination), {now}, {request_id}. Default <prefix>_{n:04d}.")
    required: list[str] = Field(default_factory=list, description="commits: params a request must carry (else 400).")
    response: ApiResponse | None = Field(None, description="The answer (commits: to a request that committed).")
    effect_ref: str | None = Field(None, description="commits: where the answer shows the effect ref (the new "
                                                     "{id}): body.<dotted path> or header.<Name>.")
    idempotency: ApiIdempotency | None = Field(None, description="commits: this route's own contract (default: "
                                                                 "the api's).")
    id_type: Literal["string", "integer"] = Field("string", description="commits: how the answer shows the new {id}: "
                                                  "a string, or an integer (id_format then renders digits only).")
    resource: str | None = Field(None, description="commits: dotted path of the stored resource in the answer's body "
                                                   "(e.g. ticket for {ticket: {...}}): what reads and lookups answer. "
                                                   "Default: the whole body.")
    request_schema: dict[str, Any] | None = Field(
        None, description="commits: a JSON Schema of the request's body (self-contained, no $ref to outside it, read "
        "as api.schema_dialect says); a request that breaks it is refused with invalid_status, the violations "
        "listed, and commits nothing.")
    invalid_status: int = Field(400, ge=400, le=499, description="commits: the status of a request that breaks "
                                                                 "request_schema (e.g. 422).")
    wrap: str | None = Field(None, description="reads: dotted path the resource sits at in the answer (e.g. ticket: "
                                               "{ticket: {...}}). Default: the resource itself.")

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v.upper() not in HTTP_METHODS:
            raise ValueError(f"method {v!r} is not one of {', '.join(HTTP_METHODS)}")
        return v.upper()

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not PATH_TEMPLATE.match(v):
            raise ValueError(f"path template {v!r} does not parse: it starts with '/', holds no query, space or "
                             "'#', and each placeholder is a whole {name} (e.g. /v1/items/{id})")
        names = re.findall(r"\{(\w+)\}", v)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"path template {v!r} names {', '.join('{' + n + '}' for n in twice)} twice: each path "
                             "param needs a name of its own")
        return v

    @property
    def role(self) -> str:
        return "commits" if self.commits else "reads" if self.reads else "lookup" if self.lookup else "answers"


class ApiSpec(BaseModel):
    """A generic destination: routes, their idempotency contract, and how the API answers."""

    model_config = ConfigDict(extra="forbid")
    request_format: RequestFormat = Field(
        "json", description="How request bodies are read: json (an object), form (application/x-www-form-"
        "urlencoded, as Stripe sends), aws_query (form with Action=..., as EC2 and other AWS query APIs).")
    client_reference_field: str | None = Field(
        None, description="The request param kept as the resource's client reference (the ledger's "
        "client_reference, and what lookup routes search), e.g. metadata[order_id].")
    idempotency: ApiIdempotency = Field(default_factory=ApiIdempotency,
                                        description="The contract of the routes that commit.")
    errors: ApiErrors = Field(default_factory=ApiErrors)
    base_path: str = Field("", description="The path every route's path begins with (e.g. /api/v2, from an OpenAPI "
                                           "document's servers:); the routes' paths are the whole paths on the wire.")
    schema_dialect: SchemaDialect = Field("openapi-3.1", description="How request_schema is read: OpenAPI 3.0's schema "
                                          "objects (nullable, ...) or 3.1's (JSON Schema 2020-12).")
    routes: dict[RouteName, ApiRoute] = Field(min_length=1, description="By name; a route that commits names "
                                                                       "the intent kind it serves.")

    @model_validator(mode="after")
    def _consistent(self) -> ApiSpec:
        if self.errors.body is None:
            self.errors.body = AWS_ERROR_BODY if self.request_format == "aws_query" else dict(DEFAULT_ERROR_BODY)
        _check_body(self.errors.body, ERROR_NAMES + ("request_id",), "errors.body", ())
        for name, value in self.errors.headers.items():
            _check_template(value, ERROR_NAMES + ("request_id",), f"errors.headers.{name}")
        if self.base_path and (not PATH_TEMPLATE.match(self.base_path) or self.base_path.endswith("/")
                               or "{" in self.base_path):
            raise ValueError(f"base_path {self.base_path!r}: give a path such as /api/v2 (a leading '/', none at the "
                             "end, no placeholder), or leave it out")
        seen: dict[tuple[str, str, tuple[tuple[str, str], ...]], str] = {}
        for name, route in self.routes.items():
            if not (route.path + "/").startswith(self.base_path + "/"):
                raise ValueError(f"routes.{name}.path {route.path!r} does not begin with base_path {self.base_path!r}: "
                                 "a route's path is its whole path on the wire")
            _check_route(self, name, route)
            where = (route.method, route.path, tuple(sorted(route.match.items())))
            if where in seen:
                raise ValueError(f"routes {seen[where]!r} and {name!r} both match {route.method} {route.path}"
                                 + (f" with {dict(route.match)}" if route.match else "")
                                 + ": a request could not tell them apart; add a `match` to one")
            seen[where] = name
        return self

    def commit_routes(self) -> dict[str, ApiRoute]:
        return {name: route for name, route in self.routes.items() if route.commits}

    def lookup_route(self) -> tuple[str, ApiRoute] | None:
        return next(((n, r) for n, r in self.routes.items() if r.lookup), None)


def _check_route(api: ApiSpec, name: str, route: ApiRoute) -> None:
    where = f"routes.{name}"
    roles = [k for k in ("commits", "reads", "lookup") if getattr(route, k)]
    if len(roles) > 1:
        raise ValueError(f"{where}: a route either commits, reads or looks up; it declares {' and '.join(roles)}")
    if not route.commits:
        for key in ("id_format", "effect_ref", "idempotency", "resource", "request_schema"):
            if getattr(route, key) is not None:
                raise ValueError(f"{where}.{key} applies to a route that commits; this one {route.role}")
        if route.required or route.id_type != "string" or route.invalid_status != 400:
            key = "required" if route.required else "id_type" if route.id_type != "string" else "invalid_status"
            raise ValueError(f"{where}.{key} applies to a route that commits; this one {route.role}")
    if route.wrap is not None and not route.reads:
        raise ValueError(f"{where}.wrap applies to a reads route; this one {route.role}")
    if not route.lookup and (route.query_param is not None or route.result_field is not None):
        raise ValueError(f"{where}: query_param / result_field apply to a lookup route; this one {route.role}")
    target = route.reads or route.lookup
    if target is not None:
        commits = list(api.commit_routes())
        if target not in commits:
            raise ValueError(f"{where}.{route.role}: {target!r} is not a route that commits (valid: "
                             f"{', '.join(commits) or 'none declared'})")
        if route.method != "GET":
            raise ValueError(f"{where}: a {route.role} route answers GET, not {route.method}")
        if route.response is not None:
            raise ValueError(f"{where}.response: a {route.role} route answers what {target!r} stored; it "
                             "declares no answer of its own")
    if route.reads and read_param(route.path) is None:
        raise ValueError(f"{where}.path {route.path!r}: a reads route names the resource by {{id}} in its path (or by "
                         "its only path param, e.g. /tickets/{ticket_id})")
    if route.lookup:
        if api.client_reference_field is None:
            raise ValueError(f"{where}: a lookup searches by client reference, and the api declares no "
                             "client_reference_field (the request param that holds it)")
        route.query_param = route.query_param or "client_reference"
        route.result_field = route.result_field or "items"
    if route.commits:
        _check_commit_route(api, name, route)
    elif route.role == "answers":
        response = route.response or ApiResponse()
        _check_answer(response, ANSWER_NAMES, where + ".response")


def _check_commit_route(api: ApiSpec, name: str, route: ApiRoute) -> None:
    where = f"routes.{name}"
    route.id_format = route.id_format or _default_id_format(name)
    _check_template(route.id_format, ID_NAMES, f"{where}.id_format")
    if route.response is None:
        route.response = ApiResponse(status=200, body={"id": "{id}"})
        route.effect_ref = route.effect_ref or "body.id"
    elif route.effect_ref is None:
        raise ValueError(f"{where}.effect_ref: say where the answer shows the effect ref, the new {{id}} "
                         "(body.<dotted path> or header.<Name>)")
    _check_answer(route.response, ANSWER_NAMES, f"{where}.response")
    ref = route.effect_ref
    assert ref is not None
    kind, _, path = ref.partition(".")
    if kind not in ("body", "header") or not path:
        raise ValueError(f"{where}.effect_ref {ref!r}: give body.<dotted path> (e.g. body.id) or header.<Name>")
    sample = render_answer_sample(route)
    if kind == "header":
        headers = {k.lower(): v for k, v in sample["headers"].items()}
        found = headers.get(path.lower())
        declared = ", ".join(route.response.headers) or "none"
        if found is None:
            raise ValueError(f"{where}.effect_ref {ref!r} matches no header of the declared response (headers: "
                             f"{declared})")
    else:
        found = find(sample["body"], path)
        if found is None:
            raise ValueError(f"{where}.effect_ref {ref!r} matches nothing in the declared response body")
    if SAMPLE_ID not in str(found):
        raise ValueError(f"{where}.effect_ref {ref!r} holds {found!r} in the declared response, not the new "
                         "resource's {id}: the ref an agent cites must name the effect")
    if route.resource is not None and not isinstance(find(sample["body"], route.resource), dict):
        raise ValueError(f"{where}.resource {route.resource!r} names no object in the declared response body (the "
                         "stored resource is a JSON object of the answer, e.g. ticket for {ticket: {...}})")
    if route.request_schema is not None:
        problem = schema_problem(route.request_schema, api.schema_dialect)
        if problem:
            raise ValueError(f"{where}.request_schema is not a valid schema: {problem}")
    if route.id_type == "integer" and not render_text(route.id_format, {"n": 1, "now": 0, "request_id": "1"},
                                                      {}).isdigit():
        raise ValueError(f"{where}.id_format {route.id_format!r}: an integer id renders digits only (e.g. {{n}})")
    style = (route.idempotency or api.idempotency).style
    if style == "client_token" and api.request_format == "json" and route.method == "GET":
        raise ValueError(f"{where}: a client_token travels in the body, and a GET has none")


def _default_id_format(name: str) -> str:
    letters = "".join(word[0] for word in name.split("_") if word) or "r"
    return letters[:4] + "_{n:04d}"


def _check_answer(response: ApiResponse, names: tuple[str, ...], where: str) -> None:
    _check_body(response.body, names, where + ".body", ())
    for header, value in response.headers.items():
        _check_template(value, names, f"{where}.headers.{header}")


def _check_body(body: Any, names: tuple[str, ...], where: str, path: tuple[str, ...]) -> None:
    if isinstance(body, str):
        _check_template(body, names, where)
        if looks_like_xml(body):
            try:
                parse_xml(render_text(body, {n: 1 for n in names}, {}, xml=True))
            except TemplateError as exc:
                raise ValueError(f"{where}: {exc}") from None
    elif isinstance(body, dict):
        for key, value in body.items():
            _check_template(str(key), names, where)
            _check_body(value, names, where, (*path, str(key)))
    elif isinstance(body, list):
        for value in body:
            _check_body(value, names, where, path)


def _check_template(text: str, names: tuple[str, ...], where: str) -> None:
    try:
        check(text, names)
    except TemplateError as exc:
        raise ValueError(f"{where}: {exc}") from None


def render_answer_sample(route: ApiRoute) -> dict[str, Any]:
    """The route's declared answer rendered for a sample request (validation, the docs' examples)."""
    assert route.response is not None
    values = {"id": SAMPLE_ID, "n": 1, "now": 0, "request_id": "req_sample", "key": None}
    return {"body": render_body(route.response.body, values, {}),
            "headers": {k: render_text(v, values, {}) for k, v in route.response.headers.items()}}


def load_api_file(reference: str, base_dir: Path | None) -> dict[str, Any]:
    """The declaration an ``api: NAME-or-PATH`` names: a bundled profile (``harness/apis/NAME.yaml``) or a
    YAML file relative to the scenario's folder; validated, with errors naming that file's lines."""
    from harness.errors import ScenarioError
    from harness.resources import api_profile, api_profiles
    from harness.yaml_files import load_yaml_mapping, validation_message

    if "/" in reference or reference.endswith((".yaml", ".yml")):
        path = Path(reference)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
    else:
        path = api_profile(reference)
        if not path.is_file():
            bundled = ", ".join(api_profiles()) or "none"
            raise ValueError(f"no bundled API profile {reference!r} (bundled: {bundled}); or give a path to a YAML "
                             "file holding an api declaration, relative to the scenario (e.g. ./apis/mine.yaml)")
    try:
        data, root = load_yaml_mapping(path, "an api declaration is a mapping with keys request_format, "
                                              "idempotency, errors, routes")
    except ScenarioError as exc:
        raise ValueError(str(exc)) from None
    try:
        ApiSpec.model_validate(data)
    except Exception as exc:  # a ValidationError: its lines are in that file, not in the scenario
        message = validation_message(path, root, exc, ApiSpec)
        if message is None:
            raise
        raise ValueError(f"in the api declaration {path}:\n{message}") from None
    return data
