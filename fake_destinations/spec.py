"""How a scenario declares a fake destination (``DestinationSpec``) and what the agent is told.

``DestinationSpec`` validates one entry of a scenario's ``destinations:`` mapping; unknown keys are
errors. Options left out take the service's defaults (see ``services.SERVICES``), filled in after
validation so that ``model_dump()`` is complete. ``describe(spec)`` is the agent-facing contract the
harness writes into the intents file: a typed ``harness.contract.DestinationContract`` whose
``to_dict()`` is the JSON agents read.

Validating reads no file: an ``api: NAME-or-PATH`` is read by the loader first (``read_api_files`` for a
scenario's destinations, ``load_destination`` for one), which puts the declaration itself in its place.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fake_destinations.api_spec import ApiRoute, ApiSpec, load_api_file
from fake_destinations.services import (
    API_SERVICE,
    ASYNC_STATUS_PATH,
    CREATE_ASYNC,
    MCP_SERVICE,
    SERVICES,
    ContractStyle,
    IdempotencyStyle,
    LookupStyle,
)
from harness.contract import (
    ACCOUNT_HEADER,
    CLIENT_REFERENCE_FIELD,
    CLIENT_TOKEN_FIELD,
    DESTINATION_ENV_PLACEHOLDERS,
    DESTINATION_ENV_PREFIX,
    ENV_NAME_PATTERN,
    HARNESS_ENV_PREFIX,
    IDEMPOTENCY_HEADER,
    LOOKUP_RESULT_FIELD,
    MCP_ENDPOINT,
    MCP_SERVER_ENV_PREFIX,
    MCP_TOOL_CALL,
    MCP_TRANSPORT,
    MCP_TRANSPORTS,
    REPLAYED_HEADER,
    DestinationContract,
    IdempotencyContract,
    LookupContract,
    OperationContract,
    StatusContract,
    check_destination_env,
)

if TYPE_CHECKING:
    ServiceName = str
else:  # one truth: the choices are the catalogue's names, in its order
    ServiceName = Literal[tuple(SERVICES)]
FaultName = Literal["error_before_commit", "error_after_commit", "rate_limited", "drop_after_exec"]
# the faults a destination can produce itself, by transport (validation and exploration read it)
FAULTS_BY_TRANSPORT: dict[str, tuple[str, ...]] = {
    "http": ("error_before_commit", "error_after_commit", "rate_limited"),
    "ssh": ("drop_after_exec", "error_before_commit"),
    MCP_TRANSPORT: ("error_before_commit", "error_after_commit", "rate_limited"),  # as tool error results
}
McpIdempotency = Literal["none", "argument", "natural_key"]
if TYPE_CHECKING:
    McpTransport = str
else:  # one truth: the contract's names
    McpTransport = Literal[MCP_TRANSPORTS]
# an MCP tool's idempotency, as the destination's contract spells it (one style per destination)
MCP_CONTRACT_STYLES: dict[str, ContractStyle] = {"none": "none", "argument": "client_token",
                                                 "natural_key": "natural_key"}
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")  # the MCP specification's tool names (SEP-986)


class RateLimit(BaseModel):
    """A fixed window on side-effecting requests; over the limit answers 429 with Retry-After."""

    model_config = ConfigDict(extra="forbid")
    max_requests: int = Field(ge=1, description="Side-effecting requests allowed per window.")
    per_seconds: float = Field(gt=0, description="Window length in seconds (destination clock).")
    retry_after_seconds: int = Field(1, ge=0, description="Value of the Retry-After header on a 429.")


class Failure(BaseModel):
    """A fault the destination itself produces on its nth side-effecting request (or SSH command)."""

    model_config = ConfigDict(extra="forbid")
    at: int = Field(ge=1, description="Which side-effecting request (1-based, counted since the last "
                                      "reset; reads and requests refused by the rate_limit window not "
                                      "counted) gets the fault.")
    fault: FaultName = Field(description="error_before_commit: answer `status` without committing; "
                                         "error_after_commit: commit, then answer `status`; "
                                         "rate_limited: answer 429 with Retry-After; "
                                         "drop_after_exec (ssh only): run the command, then drop the "
                                         "connection before its exit status.")
    status: int | None = Field(None, ge=400, le=599, description="HTTP status of the error (default 500, "
                                                                 "429 for rate_limited).")
    retry_after_seconds: int = Field(1, ge=0, description="Retry-After for rate_limited.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra headers on the error's answer "
                                    "(e.g. Stripe-Should-Retry: 'true'); api destinations.")


class McpAnnotations(BaseModel):
    """An MCP tool's annotations (the specification's ToolAnnotations), published verbatim in tools/list.
    They are hints a server gives: they may lie, and a scenario may declare them to (idempotentHint: true
    on a tool whose calls each commit)."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(None, description="A human-readable title of the tool.")
    readOnlyHint: bool | None = Field(None, description="The tool does not change its environment.")
    destructiveHint: bool | None = Field(None, description="The tool may destroy or overwrite (when not read-only).")
    idempotentHint: bool | None = Field(None, description="Calling it again with the same arguments has no "
                                        "further effect (when not read-only).")
    openWorldHint: bool | None = Field(None, description="The tool reaches entities outside the server.")


class McpTool(BaseModel):
    """One tool of an MCP destination: a tool that commits an effect, a lookup tool, or one that only
    answers (neither)."""

    model_config = ConfigDict(extra="forbid")
    description: str | None = Field(None, description="The tool's description in tools/list.")
    effect: str | None = Field(None, description="The effect kind each committing call writes to the ledger "
                               "(e.g. order_created); absent: the tool commits nothing.")
    required: list[str] = Field(default_factory=list, description="Arguments a call must give; else the error "
                                "result `missing_argument` (nothing committed).")
    idempotency: McpIdempotency = Field(
        "none", description="none: every call commits; argument: a second call with the same key argument "
        "(idempotency_argument) and the same other arguments returns the first result, other arguments the "
        "error result idempotent_parameter_mismatch; natural_key: one effect per value of the natural_key "
        "argument, a second call returns the existing resource.")
    idempotency_argument: str = Field("idempotency_key", description="idempotency: argument: the argument "
                                      "holding the key (left out of the arguments' fingerprint).")
    natural_key: str = Field(CLIENT_REFERENCE_FIELD, description="idempotency: natural_key: the argument "
                             "whose value names the one effect.")
    lookup: str | None = Field(None, description="A lookup tool: the tool (one with an effect) whose "
                               f"resources it finds, by its `{CLIENT_REFERENCE_FIELD}` argument; answers "
                               f"{{\"{LOOKUP_RESULT_FIELD}\": [resources]}}.")
    annotations: McpAnnotations | None = Field(None, description="Published verbatim in tools/list.")

    @model_validator(mode="after")
    def _coherent(self) -> McpTool:
        defaults = type(self).model_fields  # a dumped spec gives every field: a value unlike the default is given
        if self.lookup is not None and self.effect is not None:
            raise ValueError(f"a lookup tool (lookup: {self.lookup!r}) finds effects and commits none: "
                             f"leave out effect {self.effect!r}")
        if self.idempotency != "none" and self.effect is None:
            raise ValueError(f"idempotency {self.idempotency!r} deduplicates effects, and this tool declares "
                             "no effect; valid without one: 'none'")
        if self.idempotency_argument != defaults["idempotency_argument"].default and self.idempotency != "argument":
            raise ValueError(f"idempotency_argument names the key of idempotency 'argument', and this tool's "
                             f"idempotency is {self.idempotency!r}")
        if self.natural_key != defaults["natural_key"].default and self.idempotency != "natural_key":
            raise ValueError(f"natural_key names the argument of idempotency 'natural_key', and this tool's "
                             f"idempotency is {self.idempotency!r}")
        return self


# -- a team's own service as a destination (docs/containers.md, "A team's own service as a destination") ----------

# the options only a fake destination has: what it does itself (its own faults, delays, comparisons); a
# container destination is the team's service, which answers as it answers (the proxy's faults still apply)
FAKE_ONLY_OPTIONS = ("volatile_fields", "processing_delay_seconds", "async_completion_seconds", "put_notifies",
                     "rate_limit", "failures", "endpoint", "tools", "mcp_transport")
# the options of a container destination (image: present); the contract options (api, service, idempotency,
# lookup, retention_seconds, key_scope, lookup_lag_seconds) describe the service to the agent, as for a fake
CONTAINER_OPTIONS = ("image", "port", "env", "command", "health", "database", "ledger")
CONTAINER_CONTRACT_OPTIONS = ("service", "api", "idempotency", "lookup", "retention_seconds", "key_scope",
                              "lookup_lag_seconds")
# and what any destination, fake or container, may set: the variables it gives the agent
CONTAINER_KEYS = CONTAINER_CONTRACT_OPTIONS + CONTAINER_OPTIONS + ("agent_env",)
ENV_NAME = re.compile(ENV_NAME_PATTERN)
NETWORK_ALIAS = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label
# what the ledger probe may fill of one effect row (fake_destinations.ledger's effects table)
LEDGER_FIELDS = ("effect_ref", "kind", "operation_key", "client_reference", "committed_at", "params", "flow_id")


# what a scenario declares at the fault proxy instead of a fake's own behaviour, on a container destination
_PROXY_INSTEAD = {
    "failures": " and make the fault at the proxy (faults:, e.g. an error after the commit: action replace_status, "
                "status 500; before it: action synthetic_status)",
    "rate_limit": " and make the 429 at the proxy (faults:, action synthetic_status, status 429, retry_after)",
    "processing_delay_seconds": " and slow the answer at the proxy (faults:, action latency or hold_response)",
}


def _words_or_a_line(schema: dict[str, Any]) -> None:
    """A command is read as words or as one string split as a shell would: publish both."""
    schema["anyOf"].insert(1, {"type": "string", "description": "One line, split into words as a shell would."})


def _words(value: Any) -> Any:
    """A command as a list of words, or a string split as a shell would."""
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"the command {value!r} does not split into words: {exc}") from None
        if not words:
            raise ValueError("the command is empty; leave `command` out to run the image's own")
        return words
    return value


class ServiceHealth(BaseModel):
    """Readiness of a container destination: a GET on its port, directly (not through the proxy)."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field("/", description="Path of the health check; the service is ready once it answers 2xx.")
    timeout_seconds: float = Field(30.0, gt=0, le=600, description="How long the harness waits for a 2xx before "
                                   "it gives up (the error names the image, the URL, the last error and the "
                                   "container's log tail).")

    @field_validator("path")
    @classmethod
    def _a_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"a path on the service's port starting with '/' (e.g. /healthz), not {value!r}")
        return value


class ServiceDatabase(BaseModel):
    """A database container beside the service, on the run's own network under `alias`; never published."""

    model_config = ConfigDict(extra="forbid")
    image: str = Field(min_length=1, description="A local image (the harness never pulls): docker build or docker "
                       "load it first.")
    env: dict[str, str] = Field(default_factory=dict, description="Its environment.")
    command: list[str] | None = Field(None, description="Its command (words, or one string split as a shell "
                                      "would); default: the image's own.", json_schema_extra=_words_or_a_line)
    alias: str = Field("db", description="Its host name on the run's network (the service reaches it as "
                       "`alias`, e.g. postgresql://db/orders).")

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, value: Any) -> Any:
        return _words(value)

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        if not NETWORK_ALIAS.match(value):
            raise ValueError(f"{value!r} is no host name: 1 to 63 of a-z 0-9 '-', not starting or ending with '-'")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _env_names(value)


def _env_names(value: dict[str, str]) -> dict[str, str]:
    bad = [name for name in value if not ENV_NAME.match(name)]
    if bad:
        raise ValueError(f"{bad[0]!r} is no environment variable name: letters, digits and '_', not starting "
                         "with a digit")
    return value


class HttpLedgerProbe(BaseModel):
    """The service lists its committed effects on a GET endpoint (asked directly, never through the proxy)."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Path of the listing on the service's port, e.g. /_effects.")
    rows: str | None = Field(None, description="Dotted path of the list of rows in the JSON answer (e.g. items); "
                             "none: the answer is the list.")

    @field_validator("path")
    @classmethod
    def _a_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"a path on the service's port starting with '/' (e.g. /_effects), not {value!r}")
        return value


class SqlLedgerProbe(BaseModel):
    """A query listing the committed effects, run by exec in the service's container or the database's."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, description="One SELECT whose rows are the effects (its column names are "
                       "what ledger.fields names).")
    engine: Literal["sqlite", "postgres"] = Field("sqlite", description="sqlite: `sqlite3 -json DATABASE QUERY` "
                                                  "(the sqlite3 program in that container); postgres: `psql` "
                                                  "(json_agg of the query's rows).")
    container: Literal["service", "database"] = Field("service", description="Where the query runs: the service's "
                                                      "container, or the `database:` one.")
    database: str = Field(min_length=1, description="sqlite: the database file's path in that container; postgres: "
                          "the database's name.")
    user: str | None = Field(None, description="postgres: the role psql connects as (default postgres).")

    @model_validator(mode="after")
    def _engine_options(self) -> SqlLedgerProbe:
        if self.user is not None and self.engine != "postgres":
            raise ValueError(f"user names a postgres role; engine {self.engine!r} has none (leave it out)")
        if self.engine == "sqlite" and not self.database.startswith("/"):
            raise ValueError(f"database: for engine sqlite, the absolute path of the file in the container, not "
                             f"{self.database!r}")
        return self


class LedgerFields(BaseModel):
    """Which field of a listed row holds each column of the harness's effect ledger. A field named here must
    be in every row (else the probe fails, and the run is INCOMPLETE); one left out is derived or null."""

    model_config = ConfigDict(extra="forbid")
    effect_ref: str = Field(description="The effect's id (what the service answered the client, e.g. ord_0001).")
    kind: str | None = Field(None, description="The effect kind; default: the one the contract's committing "
                             "route declares (required when it declares several).")
    operation_key: str | None = Field(None, description="The idempotency key the effect was committed under.")
    client_reference: str | None = Field(None, description="The client reference the effect was tagged with.")
    committed_at: str | None = Field(None, description="When it was committed: unix seconds, or an ISO 8601 time "
                                     "(no zone: UTC). Needed to infer flow_id; default: when the probe first saw it.")
    params: str | None = Field(None, description="The parameters committed (a JSON object, or a JSON text of one): "
                               "rule H033 holds them against the intent's.")
    flow_id: str | None = Field(None, description="The X-Harness-Flow header of the request that committed it, if "
                                "the service keeps it; default: inferred from the proxy journal (the one forwarded "
                                "write of that destination, with the same key when keyed, whose time spans "
                                "committed_at).")


class LedgerProbe(BaseModel):
    """How the harness lists a container destination's committed effects: its ground truth."""

    model_config = ConfigDict(extra="forbid")
    http: HttpLedgerProbe | None = Field(None, description="A GET endpoint listing the effects.")
    sql: SqlLedgerProbe | None = Field(None, description="A SQL query listing the effects.")
    fields: LedgerFields = Field(description="Which field of a row holds each ledger column.")
    interval_seconds: float = Field(0.2, ge=0.05, le=10, description="How often the probe lists the effects while "
                                    "the agent runs (restart_agent.after_effects counts them); a last listing is "
                                    "always made after the agent ended.")

    @model_validator(mode="after")
    def _one_source(self) -> LedgerProbe:
        if (self.http is None) == (self.sql is None):
            raise ValueError("a ledger probe declares one source: `http: {path: /_effects, rows: items}` or `sql: "
                             "{query: ..., database: ...}`" + (", not both" if self.http is not None else ""))
        return self


def _not_the_harness_s(name: str) -> str:
    if name.startswith(HARNESS_ENV_PREFIX):
        raise ValueError(f"the {HARNESS_ENV_PREFIX}* variables are the harness's (the contract's, the operator's); "
                         "name yours otherwise")
    return name


AgentEnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN), AfterValidator(_not_the_harness_s)]
AgentEnvTemplate = Annotated[str, AfterValidator(check_destination_env)]


def _agent_env_schema(schema: dict[str, Any]) -> None:
    """Published as loading reads it: names (``propertyNames``, not the ``patternProperties`` that let any other
    name through) and templates whose placeholders are the valid ones."""
    schema.pop("patternProperties", None)
    schema["propertyNames"] = {"pattern": ENV_NAME_PATTERN, "not": {"pattern": f"^{HARNESS_ENV_PREFIX}"}}
    placeholders = "|".join(DESTINATION_ENV_PLACEHOLDERS)
    template = rf"^([^{{}}\x00]|\{{\{{|\}}\}}|\{{({placeholders})\}})*$"
    schema["additionalProperties"] = {"type": "string", "pattern": template}


def _api_may_be_a_name(schema: dict[str, Any]) -> None:
    """`api:` is read as a declaration or as the name of one (a profile, a file): publish both."""
    schema["anyOf"].insert(1, {"type": "string", "description": "A bundled profile's name, or a path to a "
                                                                "YAML file of an api declaration."})


class DestinationSpec(BaseModel):
    """One fake destination of a scenario: a service and its idempotency contract."""

    model_config = ConfigDict(extra="forbid")

    service: ServiceName = Field(description="Which fake service to run: " + ", ".join(SERVICES) + f" ({API_SERVICE}: "
                                 "a generic destination, declared under `api:`; giving `api:` is enough).")
    api: ApiSpec | None = Field(
        None, description="A generic destination: any HTTP API declared route by route (docs/destinations.md, "
        "'Generic destinations'); or the name of a bundled profile (stripe, openai, ...), or a path to a YAML "
        "file holding the declaration, relative to the scenario.", json_schema_extra=_api_may_be_a_name)
    image: str | None = Field(
        None, min_length=1, description="A team's own service as the destination (docs/containers.md): the local "
        "image the harness runs, per scenario, behind the fault proxy; `api:` (or `service:`) is the contract the "
        "agent is told, and no fake answers are served. The harness never pulls: build or load it first.")
    port: int | None = Field(None, ge=1, le=65535, description="image: the container port the service listens on; "
                             "published on 127.0.0.1 at a random host port.")
    env: dict[str, str] | None = Field(None, description="image: the service's environment.")
    command: list[str] | None = Field(None, description="image: its command (words, or one string split as a shell "
                                      "would); default: the image's own.", json_schema_extra=_words_or_a_line)
    health: ServiceHealth | None = Field(None, description="image: readiness, a GET answered 2xx (default: path /, "
                                         "30 s).")
    database: ServiceDatabase | None = Field(None, description="image: a database container beside the service, on "
                                             "the run's own network, never published.")
    ledger: LedgerProbe | None = Field(None, description="image: how the harness lists the effects the service "
                                       "committed (its ground truth), by HTTP or SQL.")
    idempotency: IdempotencyStyle | None = Field(
        None, description="Deduplication contract. none: every write commits; stripe: optional "
        f"{IDEMPOTENCY_HEADER} header, first status and body stored (errors too) and replayed with "
        f"{REPLAYED_HEADER}: true, other payload 422; ietf: like stripe but the key is required (400) "
        f"and a retry while the first is processing gets 409; client_token: EC2-like `{CLIENT_TOKEN_FIELD}` body "
        "field, same token+params return the existing resource, other params IdempotentParameterMismatch. "
        "Default: the service's own (an MCP destination's comes from its tools).")
    retention_seconds: float | None = Field(
        86400.0, gt=0, description="How long a key is remembered after its first request completed "
        "(destination clock; in use while that request is in progress); a retry after that commits again. "
        "null: forever.")
    key_scope: Literal["global", "account", "path"] = Field(
        "global", description=f"Where a key is unique: global; account (per {ACCOUNT_HEADER} header); path "
        "(per method and path).")
    volatile_fields: list[str] = Field(
        default_factory=list, description="Top-level body fields ignored when comparing payloads "
        "(e.g. timestamps a client regenerates on each attempt).")
    processing_delay_seconds: float = Field(
        0.0, ge=0, le=60, description="Time a write stays in progress before it commits (real time).")
    async_completion_seconds: float = Field(
        1.0, ge=0, description="Async services: time (destination clock) before an accepted operation "
        "reports succeeded.")
    lookup: LookupStyle | None = Field(
        None, description=f"client_reference: GET <collection>?{CLIENT_REFERENCE_FIELD}=X lists matching "
        "resources; none: no search endpoint (404). Default: the service's own.")
    lookup_lag_seconds: float = Field(
        0.0, ge=0, description="Index lag: a resource appears in lookups only this long (destination "
        "clock) after its commit.")
    put_notifies: bool = Field(
        False, description="accounts: every PUT also sends a notification (an effect), even when the "
        "state did not change - the method name is no proof of idempotency.")
    rate_limit: RateLimit | None = Field(None, description="Fixed-window rate limit on writes.")
    failures: list[Failure] = Field(default_factory=list, description="Faults the destination produces itself.")
    endpoint: str | None = Field(None, description=f"{MCP_SERVICE}: the path of the MCP endpoint (default "
                                 f"{MCP_ENDPOINT}).")
    agent_env: dict[AgentEnvName, AgentEnvTemplate] = Field(
        default_factory=dict, json_schema_extra=_agent_env_schema,
        description="Variables this destination gives the agent, beside the contract's (for an agent that reads "
        f"its address from BILLING_URL, not {DESTINATION_ENV_PREFIX}BILLING): name -> template, placeholders "
        + ", ".join(f"{{{name}}} ({what})" for name, what in DESTINATION_ENV_PLACEHOLDERS.items())
        + "; {{ and }} are literal braces. Process and container agents alike.")
    mcp_transport: McpTransport | None = Field(
        None, description=f"{MCP_SERVICE}: how the agent reaches the server. http (default): Streamable HTTP at its "
        f"URL; stdio: a server it starts as a subprocess, the command in {MCP_SERVER_ENV_PREFIX}<NAME> "
        "(docs/destinations.md, 'MCP over stdio'). The same tools, ledger and faults.")
    tools: dict[str, McpTool] | None = Field(
        None, description=f"{MCP_SERVICE}: the tools the MCP server offers, by name (docs/destinations.md, "
        "'MCP tool servers'); an intent names a tool as its kind.")

    @property
    def is_container(self) -> bool:
        """A team's own service in a container (``image:``), not a fake."""
        return self.image is not None

    @field_validator("command", mode="before")
    @classmethod
    def _command_words(cls, value: Any) -> Any:
        return _words(value)

    @field_validator("env")
    @classmethod
    def _env_variable_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return _env_names(value) if value is not None else None

    @field_validator(*FAKE_ONLY_OPTIONS)
    @classmethod
    def _fake_only(cls, value: Any, info: ValidationInfo) -> Any:
        image = info.data.get("image")
        name = info.field_name or "?"
        if image is not None and value != cls.model_fields[name].get_default(call_default_factory=True):
            raise ValueError(f"{name} is a fake destination's own behaviour; image {image!r} is the team's service, "
                             f"which answers as it answers: leave {name} out{_PROXY_INSTEAD.get(name, '')}"
                             f" (valid on a container destination: {', '.join(CONTAINER_KEYS)})")
        return value

    @field_validator(*CONTAINER_OPTIONS[1:])
    @classmethod
    def _container_only(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("image") is None:
            raise ValueError(f"{info.field_name} applies to a container destination, one that declares `image:` (the "
                             "team's service); a fake destination has no container")
        return value

    @model_validator(mode="before")
    @classmethod
    def _api_is_a_service(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("api") is not None and "service" not in data:
            return {**data, "service": API_SERVICE}
        return data

    @model_validator(mode="before")
    @classmethod
    def _mcp_style_is_its_tools(cls, data: Any) -> Any:
        """A dumped MCP spec says the style its tools gave (natural_key, which a scenario cannot write at the
        top level): validated again, it is derived again."""
        if isinstance(data, dict) and data.get("service") == MCP_SERVICE and data.get("idempotency") == "natural_key":
            tools = data.get("tools")
            if isinstance(tools, dict) and any(isinstance(t, dict) and t.get("idempotency") == "natural_key"
                                               for t in tools.values()):
                return {k: v for k, v in data.items() if k != "idempotency"}
        return data

    @field_validator("api", mode="before")
    @classmethod
    def _api_file(cls, value: Any) -> Any:
        if isinstance(value, ApiFileError):  # the loader could not read it: said here, at its key, with the rest
            raise ValueError(value.message)
        if isinstance(value, str):
            raise ValueError(f"api {value!r} names a file, which the loader reads before validation "
                             "(harness.scenario.load, fake_destinations.spec.load_destination); give the "
                             "declaration itself here")
        return value

    @model_validator(mode="after")
    def _service_defaults(self) -> DestinationSpec:
        if self.image is not None:
            self._container_checks()
        if self.service == MCP_SERVICE:
            return self._mcp_defaults()
        for name in ("tools", "endpoint", "mcp_transport"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name} applies to service {MCP_SERVICE!r} only, not {self.service!r}")
        if self.service == API_SERVICE or self.api is not None:
            return self._api_defaults()
        service = SERVICES[self.service]
        if self.idempotency is None:
            self.idempotency = service.idempotency
        if self.lookup is None:
            self.lookup = service.lookup
        if service.transport == "ssh":
            if self.idempotency != "none":
                raise ValueError(f"idempotency {self.idempotency!r} is not available for service 'ssh'; "
                                 "valid: 'none' (the deploy command's operation marker is its own dedup)")
            if self.lookup != "none":
                raise ValueError("lookup is not available for service 'ssh'; valid: 'none'")
        for failure in self.failures:
            valid = FAULTS_BY_TRANSPORT[service.transport]
            if failure.fault not in valid:
                raise ValueError(f"fault {failure.fault!r} is not available for service {self.service!r}; "
                                 f"valid: {', '.join(valid)}")
        if self.put_notifies and self.service != "accounts":
            raise ValueError(f"put_notifies applies to service 'accounts' only, not {self.service!r}")
        if any(f.headers for f in self.failures):
            raise ValueError(f"failures[].headers apply to api destinations; service {self.service!r} answers its "
                             "own errors")
        return self


    def _container_checks(self) -> None:
        """A container destination: an HTTP contract (an api, or a built-in HTTP service's), a port, a ledger
        probe that can fill the effect rows."""
        transport = SERVICES[self.service].transport
        if transport != "http":
            http = ", ".join(n for n, s in SERVICES.items() if s.transport == "http" and n != API_SERVICE)
            raise ValueError(f"image: a container destination is an HTTP service behind the fault proxy; service "
                             f"{self.service!r} is {transport} (valid: an `api:` declaration, or one of {http})")
        if self.port is None:
            raise ValueError(f"port: required with image {self.image!r}: the container port the service listens on "
                             "(e.g. port: 8080)")
        if self.ledger is None:
            raise ValueError(f"ledger: required with image {self.image!r}: how the harness lists the effects the "
                             "service committed, e.g. ledger: {http: {path: /_effects, rows: items}, fields: "
                             "{effect_ref: id}}; without it no effect could be judged")
        sql = self.ledger.sql
        if sql is not None and sql.container == "database" and self.database is None:
            raise ValueError("ledger.sql.container: 'database' runs the query in the `database:` container, and this "
                             "destination declares none (valid: service, or declare database: {image: ...})")
        if self.ledger.fields.kind is None and len(self.effect_kinds()) > 1:
            raise ValueError(f"ledger.fields.kind: the contract commits {len(self.effect_kinds())} effect kinds "
                             f"({', '.join(self.effect_kinds())}): name the field of a row that says which")

    def effect_kinds(self) -> list[str]:
        """The effect kinds this destination's contract commits (an api's routes, a service's operations)."""
        if self.api is not None:
            return list(dict.fromkeys(r.commits for r in self.api.commit_routes().values() if r.commits))
        return list(dict.fromkeys(op.effect_kind for op in SERVICES[self.service].operations))

    def _mcp_defaults(self) -> DestinationSpec:
        """An MCP tool server: its style and lookup come from its tools (one truth), as an api
        destination's come from its routes."""
        if self.api is not None:
            raise ValueError(f"service {MCP_SERVICE!r} declares `tools:`, not `api:`")
        if not self.tools:
            raise ValueError(f"service {MCP_SERVICE!r} needs `tools:`, at least one (e.g. create_order: "
                             "{effect: order_created})")
        for name in self.tools:
            if not MCP_TOOL_NAME.match(name):
                raise ValueError(f"tool name {name!r}: 1 to 128 of A-Z a-z 0-9 _ - . (the MCP specification's)")
        committing = {name: tool for name, tool in self.tools.items() if tool.effect is not None}
        for name, tool in self.tools.items():
            if tool.lookup is not None and tool.lookup not in committing:
                raise ValueError(f"tools.{name}.lookup: {tool.lookup!r} is not a tool with an effect; valid: "
                                 f"{', '.join(committing) or '(none declared)'}")
        kinds = {(t.idempotency, t.idempotency_argument if t.idempotency == "argument" else
                  t.natural_key if t.idempotency == "natural_key" else None) for t in committing.values()}
        if len(kinds) > 1:  # the intents file says one idempotency per destination
            said = ", ".join(f"{n}: {t.idempotency}" + (f" ({t.idempotency_argument})" if t.idempotency == "argument"
                                                        else f" ({t.natural_key})" if t.idempotency == "natural_key"
                                                        else "") for n, t in committing.items())
            raise ValueError(f"the tools with an effect of one MCP destination declare one idempotency (the "
                             f"agent is told one per destination); here {said}")
        style = MCP_CONTRACT_STYLES[next(iter(kinds))[0]] if kinds else "none"
        lookup: LookupStyle = "client_reference" if any(t.lookup for t in self.tools.values()) else "none"
        if self.idempotency not in (None, style):
            raise ValueError(f"idempotency {self.idempotency!r}: an MCP destination declares it per tool "
                             f"(tools.<name>.idempotency: none | argument | natural_key; {style!r} here)")
        if self.lookup not in (None, lookup):
            raise ValueError(f"lookup {self.lookup!r}: an MCP destination's lookup is a tool with `lookup:` "
                             f"under tools ({'one is' if lookup != 'none' else 'none is'} declared)")
        # natural_key is a style only an MCP destination's tools give: the schema offers a scenario the four
        # it may write at the top level, and the contract (describe) says this one
        self.idempotency, self.lookup = style, lookup  # type: ignore[assignment]
        if self.retention_seconds is not None and "retention_seconds" in self.model_fields_set:
            raise ValueError("retention_seconds: an MCP destination remembers its keys forever (leave it out)")
        self.retention_seconds = None
        if self.key_scope != "global":
            raise ValueError(f"key_scope {self.key_scope!r}: an MCP destination's keys are global (valid: 'global')")
        if self.lookup_lag_seconds and lookup == "none":
            raise ValueError("lookup_lag_seconds delays lookups, and no tool of this destination is a lookup")
        if self.put_notifies:
            raise ValueError(f"put_notifies applies to service 'accounts' only, not {MCP_SERVICE!r}")
        for failure in self.failures:
            valid = FAULTS_BY_TRANSPORT[MCP_TRANSPORT]
            if failure.fault not in valid:
                raise ValueError(f"fault {failure.fault!r} is not available for service {MCP_SERVICE!r}; valid: "
                                 f"{', '.join(valid)}")
            if failure.status is not None or failure.headers:
                raise ValueError("failures[].status and headers: an MCP destination answers a failure as a tool "
                                 "error result (isError: true), with no HTTP status of its own")
        if self.endpoint is None:
            self.endpoint = MCP_ENDPOINT
        elif not self.endpoint.startswith("/"):
            raise ValueError(f"endpoint {self.endpoint!r} must be a path starting with '/' (e.g. {MCP_ENDPOINT})")
        return self

    def _api_defaults(self) -> DestinationSpec:
        """An api destination: its style and lookup come from the declaration (one truth), so the
        options that depend on them (retention, exploration's bounds) read them as for a service."""
        if self.service != API_SERVICE:
            raise ValueError(f"a destination is either a built-in service or an api declaration: service "
                             f"{self.service!r} takes no `api:` (leave `service` out)")
        if self.api is None:
            raise ValueError(f"service {API_SERVICE!r} needs an `api:` declaration (routes, contract, answers)")
        style = self.api.idempotency.style
        lookup: LookupStyle = "client_reference" if self.api.lookup_route() else "none"
        if self.idempotency not in (None, style):
            raise ValueError(f"idempotency {self.idempotency!r}: an api destination declares its style under "
                             f"api.idempotency.style ({style!r} here)")
        if self.lookup not in (None, lookup):
            raise ValueError(f"lookup {self.lookup!r}: an api destination's lookup is a route with `lookup:` "
                             f"under api.routes ({'one is' if lookup != 'none' else 'none is'} declared)")
        self.idempotency, self.lookup = style, lookup
        styles = {(r.idempotency or self.api.idempotency).style for r in self.api.commit_routes().values()}
        if self.key_scope != "global" and styles <= {"none"}:
            raise ValueError(f"key_scope {self.key_scope!r} scopes idempotency keys, and no route of this api "
                             "takes one (its idempotency style is 'none')")
        if self.lookup_lag_seconds and lookup == "none":
            raise ValueError("lookup_lag_seconds delays lookups, and this api declares no lookup route")
        if self.put_notifies:
            raise ValueError("put_notifies applies to service 'accounts' only, not to an api destination")
        for failure in self.failures:
            if failure.fault not in FAULTS_BY_TRANSPORT["http"]:
                raise ValueError(f"fault {failure.fault!r} is not available for an api destination; valid: "
                                 f"{', '.join(FAULTS_BY_TRANSPORT['http'])}")
        return self


@dataclass(frozen=True)
class ExplorableOption:
    """A destination option exploration may vary (``harness.strategies``), within bounds that keep a
    run short, on the destinations where it means something."""

    name: str  # a DestinationSpec field
    low: float
    high: float
    applies: Callable[[DestinationSpec], bool]


EXPLORABLE_OPTIONS: tuple[ExplorableOption, ...] = (
    ExplorableOption("retention_seconds", 0.5, 5.0, lambda spec: spec.idempotency not in (None, "none")
                     and SERVICES[spec.service].transport != MCP_TRANSPORT),  # an MCP server's keys never expire
    ExplorableOption("lookup_lag_seconds", 0.0, 3.0, lambda spec: spec.lookup == "client_reference"),
    ExplorableOption("processing_delay_seconds", 0.0, 3.0,
                     lambda spec: SERVICES[spec.service].transport == "http"),
    ExplorableOption("async_completion_seconds", 0.0, 3.0,
                     lambda spec: any(op.action == CREATE_ASYNC for op in SERVICES[spec.service].operations)),
)


@dataclass(frozen=True)
class ApiFileError:
    """An ``api: NAME-or-PATH`` the loader could not read or validate (``read_api_files``): the validator reports
    ``message`` at that destination's ``api`` key, beside the scenario's other errors."""

    message: str


def read_api_files(destinations: Any, base_dir: Path | None) -> Any:
    """A scenario's ``destinations:`` mapping with each ``api: NAME-or-PATH`` replaced by the declaration it
    names (``load_api_file``: a bundled profile, or a YAML file relative to ``base_dir``, the scenario's folder),
    and each ``openapi: PATH`` (or ``openapi: {document: PATH, ...overrides}``) by the declaration inferred from
    that OpenAPI document (``read_openapi``), before validation; one that cannot be read stays as an
    ``ApiFileError``. Anything else is left as it is."""
    if not isinstance(destinations, dict):
        return destinations
    read = {}
    for name, entry in destinations.items():
        if isinstance(entry, dict) and OPENAPI_KEY in entry:
            entry = read_openapi(entry, base_dir)
        elif isinstance(entry, dict) and isinstance(entry.get("api"), str):
            try:
                entry = {**entry, "api": load_api_file(entry["api"], base_dir)}
            except ValueError as exc:
                entry = {**entry, "api": ApiFileError(str(exc))}
        read[name] = entry
    return read


OPENAPI_KEY = "openapi"
OPENAPI_DOCUMENT_KEY = "document"


def read_openapi(entry: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """A destination that says ``openapi: PATH`` (relative to ``base_dir``), or ``openapi: {document: PATH,
    client_reference: ..., ...}`` with the inference's overrides (those of a project configuration's destination
    table, ``harness.openapi.OpenApiOverrides``): the ``api:`` declaration ``harness.openapi`` infers from it (imported
    only here: a scenario that names no document never loads the OpenAPI libraries), and the destination options the
    overrides set (a key's retention, a lookup's lag) where the entry sets none."""
    rest = {k: v for k, v in entry.items() if k != OPENAPI_KEY}
    given = entry[OPENAPI_KEY]
    overrides: dict[str, Any] = {}
    if isinstance(given, dict):
        overrides = {k: v for k, v in given.items() if k != OPENAPI_DOCUMENT_KEY}
        given = given.get(OPENAPI_DOCUMENT_KEY)
    if "api" in rest:
        return {**rest, "api": ApiFileError("give either openapi (a document the declaration is inferred from) or "
                                            "api (the declaration), not both")}
    if not isinstance(given, str) or not given:
        return {**rest, "api": ApiFileError(
            f"openapi {given!r:.80}: the path of an OpenAPI 3.0 or 3.1 document, relative to the scenario, or "
            f"{{{OPENAPI_DOCUMENT_KEY}: PATH, ...overrides}} (e.g. client_reference: external_id)")}
    path = Path(given)
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    from harness.errors import ScenarioError
    from harness.openapi import api_from_openapi

    try:
        inferred = api_from_openapi(path, overrides, where=OPENAPI_KEY)
    except ScenarioError as exc:  # OpenApiError: names the document, the place and what is valid
        return {**rest, "api": ApiFileError(str(exc))}
    return {**inferred.destination_options, **rest, "api": inferred.declaration}


def load_destination(data: dict[str, Any], base_dir: Path | None = None) -> DestinationSpec:
    """One destination's declaration validated, its ``api: NAME-or-PATH`` read first (``read_api_files``)."""
    return DestinationSpec.model_validate(read_api_files({"_": data}, base_dir)["_"])


def describe(spec: DestinationSpec | dict[str, Any]) -> DestinationContract:
    """The contract an agent reads to call this destination (see the module docstring)."""
    if not isinstance(spec, DestinationSpec):
        spec = load_destination(spec)
    if spec.api is not None:
        return _describe_api(spec, spec.api)
    if spec.tools is not None:
        return _describe_mcp(spec, spec.tools)
    service = SERVICES[spec.service]
    style = spec.idempotency or "none"
    keyed = style != "none"
    idempotency = IdempotencyContract(
        style=style,
        header=IDEMPOTENCY_HEADER if style in ("stripe", "ietf") else None,
        body_field=CLIENT_TOKEN_FIELD if style == "client_token" else None,
        retention_seconds=spec.retention_seconds if keyed else None,
        scope=spec.key_scope,
        required=style == "ietf",
        account_header=ACCOUNT_HEADER if spec.key_scope == "account" and keyed else None,
    )
    lookup = None
    if spec.lookup == "client_reference":
        lookup = LookupContract(method="GET", path=service.collection, query_param=CLIENT_REFERENCE_FIELD,
                                # what a client needs is when a write it sent shows up: a slow write commits
                                # processing_delay_seconds after it arrived, then the index lags behind
                                result_field=LOOKUP_RESULT_FIELD,
                                lag_seconds=spec.lookup_lag_seconds + spec.processing_delay_seconds)
    operations: dict[str, OperationContract] = {}
    for op in service.operations:
        if service.transport == "ssh":
            # a command holding {operation_id} creates a marker for it before acting: a rerun is a no-op
            operations[op.kind] = OperationContract(
                method="EXEC", command=op.path,
                dedup="operation_marker" if "{operation_id}" in op.path else None,
                family=op.family, convergence=op.convergence, convergence_exit_status=op.convergence_exit_status,
                required_params=tuple(op.required))
        else:
            operations[op.kind] = OperationContract(
                method=op.method, path=op.path, client_reference_field=CLIENT_REFERENCE_FIELD,
                effect_ref_field=op.effect_ref_field, body_defaults=dict(op.body_defaults) or None,
                required_params=tuple(op.required))
    status = None
    if any(op.action == CREATE_ASYNC for op in service.operations):
        status = StatusContract(method="GET", path=ASYNC_STATUS_PATH)
    return DestinationContract(service=spec.service, idempotency=idempotency, lookup=lookup,
                               operations=operations, status=status)


def _describe_api(spec: DestinationSpec, api: ApiSpec) -> DestinationContract:
    """A generic destination's contract, from its declaration: the api's default idempotency, its first
    lookup route, and one operation kind per route that commits."""
    default = api.idempotency
    style = default.style
    keyed = style != "none"
    idempotency = IdempotencyContract(
        style=style, header=default.header, body_field=default.field,
        retention_seconds=spec.retention_seconds if keyed else None, scope=spec.key_scope,
        required=style == "ietf", account_header=default.account_header if spec.key_scope == "account" and keyed
        else None)
    lookup = None
    found = api.lookup_route()
    if found is not None:
        route = found[1]
        assert route.query_param is not None and route.result_field is not None  # filled in by validation
        written = api.routes[route.lookup or ""]
        lookup = LookupContract(method="GET", path=route.path, query_param=route.query_param,
                                result_field=route.result_field,
                                lag_seconds=spec.lookup_lag_seconds + spec.processing_delay_seconds,
                                effect_ref_field=_listed_ref(written))
    operations = {}
    for kind, route in api.commit_routes().items():
        ref = route.effect_ref or ""
        operations[kind] = OperationContract(
            method=route.method, path=route.path, client_reference_field=api.client_reference_field,
            effect_ref_field=ref.partition(".")[2] if ref.startswith("body.") else None,
            required_params=tuple(route.required))
    return DestinationContract(service=API_SERVICE, idempotency=idempotency, lookup=lookup, operations=operations)


def _listed_ref(route: ApiRoute) -> str | None:
    """Where a listed resource of a write names its effect: its effect ref below the stored resource (body.ticket.id
    under resource ticket: id); None when the write stores its whole answer (the write's own field then)."""
    ref = (route.effect_ref or "").removeprefix("body.")
    if not route.resource or not ref.startswith(route.resource + "."):
        return None
    return ref.removeprefix(route.resource + ".")


def json_schema() -> dict[str, Any]:
    """JSON Schema of one ``destinations:`` entry, for the published scenario schema."""
    return DestinationSpec.model_json_schema()


def _describe_mcp(spec: DestinationSpec, tools: dict[str, McpTool]) -> DestinationContract:
    """An MCP tool server's contract: one operation per tool with an effect (method tools/call, path the
    tool's name), its first lookup tool as the lookup; keys are remembered forever."""
    style = spec.idempotency or "none"
    committing = {name: tool for name, tool in tools.items() if tool.effect is not None}
    field = None
    if committing:
        tool = next(iter(committing.values()))
        field = {"client_token": tool.idempotency_argument, "natural_key": tool.natural_key}.get(style)
    idempotency = IdempotencyContract(style=style, body_field=field, retention_seconds=None, scope="global")
    lookup = None
    finder = next((name for name, tool in tools.items() if tool.lookup is not None), None)
    if finder is not None:
        lookup = LookupContract(method=MCP_TOOL_CALL, path=finder, query_param=CLIENT_REFERENCE_FIELD,
                                result_field=LOOKUP_RESULT_FIELD,
                                lag_seconds=spec.lookup_lag_seconds + spec.processing_delay_seconds)
    operations = {
        name: OperationContract(method=MCP_TOOL_CALL, path=name, client_reference_field=CLIENT_REFERENCE_FIELD,
                                effect_ref_field="id", required_params=tuple(tool.required),
                                annotations=tool.annotations.model_dump(exclude_none=True)
                                if tool.annotations is not None else None)
        for name, tool in committing.items()}
    return DestinationContract(service=MCP_SERVICE, idempotency=idempotency, lookup=lookup, operations=operations,
                               transport=MCP_TRANSPORT, endpoint=spec.endpoint or MCP_ENDPOINT)
