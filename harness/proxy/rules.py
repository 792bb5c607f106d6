"""Fault rules: what the proxy does to which request, and the pure matching that decides it.

The fault actions are declared once, in :data:`ACTIONS` (name, phase, parameters, one-line doc), free
of mitmproxy so that scenarios validate without it. A scenario's ``faults:`` list holds
:class:`FaultRule` objects. Matching needs no network: the addon builds a :class:`RequestFacts` from
a flow and asks a :class:`RuleBook` (one per scenario run, holding the counters and seeded random
streams) which rule fires, if any.

Counting: every rule counts the requests that match its static criteria (destination, method, path,
headers, body), whether or not another rule fired on them, so a rule's schedule never depends on the
other rules. ``nth: 1`` is therefore the first matching request of the run, whatever key the agent
sent. With ``per: idempotency_key`` (or ``fingerprint``) the count restarts for each key.
"""

from __future__ import annotations

import functools
import json
import random
import re
import urllib.parse
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.contract import CLIENT_TOKEN_FIELD, IDEMPOTENCY_HEADER, MCP_TOOL_CALL, TRACEPARENT_HEADER
from harness.fingerprint import fingerprint as fingerprint_of

Phase = Literal["request", "response", "connection"]
# How the proxy sits between the agent and the destinations (the host implements each; docs/proxy.md)
ProxyMode = Literal["reverse", "reverse-https", "forward", "forward-https"]
MODES: tuple[str, ...] = get_args(ProxyMode)
CONNECTION_MATCH = frozenset({"destination"})  # all a rule can know before any request is read
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # reads: a fault on one is on a lookup, not on a write


@dataclass(frozen=True)
class FaultAction:
    """A fault action, declared once. The addon's hooks dispatch to its handler (``faults.py``, which
    fails to import unless every request and response action has exactly one); the ``action`` choices
    of the scenario schema, the parameter checks of a rule and the README's table
    (:func:`actions_markdown`) are built from it.

    ``phase`` says when it acts: ``request`` before the request is forwarded, ``response`` once the
    destination answered, ``connection`` before any request is read (the host opens no listener), so
    such a rule can match on the destination only.
    """

    name: str
    phase: Phase
    doc: str  # one line, for the scenario schema
    forwarded: str  # README: does the request reach the destination (yes, no, twice)
    client_sees: str  # README: what the client sees
    needs: Mapping[str, str] = field(default_factory=dict)  # required rule field -> hint for its error
    reads: tuple[str, ...] = ()  # optional rule fields it reads
    # per parameter, the values exploration draws (harness.strategies), simplest first; a
    # ClientTimeouts is a list of multiples of the client's timeout, turned into ms when drawn
    explore: Mapping[str, tuple[Any, ...] | ClientTimeouts] = field(default_factory=dict)
    # acts on a JSON-RPC tools/call only (an MCP tool result); on any other flow it answers 400
    tool_call_only: bool = False
    # the fault family a scenario using it is marked with (pytest -m lost_response); FaultRule.family refines
    # it by the rule's parameters (a hold then delivered is a slow answer, a synthetic 429 a rate limit)
    family: str = "error_answer"
    # kills the process that sent the request (a worker): only an agent whose engine or queue reruns a dead
    # worker's work can go on, so exploration, which runs any agent, never draws it
    kills_sender: bool = False

    @property
    def parameters(self) -> tuple[str, ...]:
        """The rule fields this action reads, the required ones first."""
        return (*self.needs, *self.reads)


@dataclass(frozen=True)
class ClientTimeouts:
    """Durations drawn as multiples of the client's timeout (a hold just past it, well past it...)."""

    multiples: tuple[float, ...]

    def milliseconds(self, client_timeout: float) -> tuple[int, ...]:
        return tuple(round(m * client_timeout * 1000) for m in self.multiples)


def _registry(*actions: FaultAction) -> dict[str, FaultAction]:
    table: dict[str, FaultAction] = {}
    for action in actions:
        if action.name in table:
            raise ValueError(f"fault action {action.name!r} is declared twice")
        table[action.name] = action
    return table


_STATUS_HINT = "e.g. 503, 429, 500"
# statuses exploration gives without forwarding: each is true (nothing was committed), so a client may
# believe it; after a commit only a 5xx, which claims nothing: a 4xx or 2xx there is a lie no client
# can see through, and an agent misled by it is not wrong
_ANSWERED_STATUSES = (503, 429, 500, 502, 504, 409, 400, 422)
_AFTER_COMMIT_STATUSES = (500, 503, 502, 504)
_STATUS_EXPLORE = {"retry_after": (None, 0, 1, 2), "body": (None,)}
_TOOL_ERROR_HINT = "a tools/call: give match.tool, or match a JSON-RPC request; any other flow is answered 400"
ACTIONS: dict[str, FaultAction] = _registry(
    FaultAction("drop_response_after_commit", "response",
                "forward; the destination commits; the client sees the connection close with zero bytes",
                forwarded="yes", client_sees="connection closed, zero bytes", family="lost_response"),
    FaultAction("reset_after_commit", "response",
                "forward; the destination commits; the client sees a TCP reset",
                forwarded="yes", client_sees="TCP reset", family="lost_response"),
    FaultAction("drop_request", "request",
                "never forward; the client sees the connection close (it cannot tell this from a lost response)",
                forwarded="no",
                client_sees="connection closed (it cannot tell this from a lost response; the ledger can)",
                family="lost_request"),
    FaultAction("hold_response", "response",
                "forward; hold the response hold_ms (past the client's timeout), then deliver or drop it (then)",
                forwarded="yes", client_sees="nothing until its timeout",
                needs={"hold_ms": "longer than the client's timeout"}, reads=("then",),
                explore={"hold_ms": ClientTimeouts((1.3, 2.0, 0.5)), "then": ("deliver", "drop")},
                family="lost_response"),
    FaultAction("synthetic_status", "request",
                "never forward; answer status (e.g. 503, 429 with retry_after, 500) at once",
                forwarded="no", client_sees="503, 429 + `Retry-After`, 500...",
                needs={"status": _STATUS_HINT}, reads=("retry_after", "body"),
                explore={"status": _ANSWERED_STATUSES, **_STATUS_EXPLORE}, family="error_answer"),
    FaultAction("replace_status", "response",
                "forward; the destination commits; the client gets status instead of the real response",
                forwarded="yes", client_sees="a status in place of the real answer",
                needs={"status": _STATUS_HINT}, reads=("retry_after", "body"),
                explore={"status": _AFTER_COMMIT_STATUSES, **_STATUS_EXPLORE}, family="error_answer"),
    FaultAction("truncate_body", "response",
                "forward; deliver the real status and headers but only keep_bytes of the body, then close",
                forwarded="yes", client_sees="a broken body: the real status, the body cut short",
                reads=("keep_bytes",), explore={"keep_bytes": (0, 8, 40)}, family="broken_answer"),
    FaultAction("malformed_chunk", "response",
                "forward; deliver the real status with a chunked body whose chunk size is not hex",
                forwarded="yes", client_sees="a broken body: a chunk size that is not hex", family="broken_answer"),
    FaultAction("refuse_connection", "connection",
                "the destination's listener is closed for the scenario: the client's connect is refused "
                "(a true not_sent)",
                forwarded="no", client_sees="connection refused: a true `not_sent`", family="lost_request"),
    FaultAction("duplicate_delivery", "request",
                "forward the request twice (a network that retries on its own); the client gets the second answer",
                forwarded="twice", client_sees="the second answer", family="duplicate_delivery"),
    FaultAction("latency", "request",
                "delay the request delay_ms plus a seeded uniform jitter of up to jitter_ms, then forward",
                forwarded="yes", client_sees="the answer, late", reads=("delay_ms", "jitter_ms"),
                explore={"delay_ms": ClientTimeouts((0.3, 1.3)), "jitter_ms": (0, 100)}, family="slow_answer"),
    FaultAction("tool_error_result", "request",
                "never forward a tools/call; the client gets a JSON-RPC result isError: true (body: its text) "
                "echoing the request's id", forwarded="no",
                client_sees="an MCP tool error result (`isError: true`); nothing was committed",
                reads=("body",), explore={"body": (None,)}, tool_call_only=True, family="error_answer"),
    FaultAction("tool_error_after_commit", "response",
                "forward a tools/call; the destination commits; the client gets a JSON-RPC result isError: true "
                "(body: its text) instead of the real one", forwarded="yes",
                client_sees="an MCP tool error result (`isError: true`) in place of the real result",
                reads=("body",), explore={"body": (None,)}, tool_call_only=True, family="error_answer"),
    FaultAction("kill_sender_after_commit", "response",
                "forward; the destination commits; the proxy SIGKILLs the process that sent the request (a "
                "worker, an activity or step executor) before it reads the answer, then drops the answer",
                forwarded="yes", client_sees="nothing: it is dead (its engine or queue may run the work again)",
                family="crash", kills_sender=True),
)
if TYPE_CHECKING:
    Action = str
else:  # one truth: the choices are the registry's names, in its order
    Action = Literal[tuple(ACTIONS)]
IDEMPOTENCY_HEADERS = (IDEMPOTENCY_HEADER.lower(), "x-" + IDEMPOTENCY_HEADER.lower())
BODY_TOKEN_FIELDS = (CLIENT_TOKEN_FIELD, "clientToken", "ClientToken", "idempotency_key")
# where an MCP tool call carries its key: an argument, or params._meta (MCP python-sdk PR #2338)
TOOL_KEY_FIELDS = (*BODY_TOKEN_FIELDS, "idempotencyKey")
TOOL_ERROR_ACTIONS = frozenset({"tool_error_result", "tool_error_after_commit"})
DEFAULT_TOOL_ERROR = "internal_error: the tool failed"

_TEMPLATE_VAR = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


@functools.lru_cache(maxsize=512)
def path_pattern(template: str) -> re.Pattern[str]:
    """Regex for a path template: ``{name}`` is one segment, ``*`` any rest; the query is ignored."""
    if not template.startswith("/"):
        raise ValueError(f"path template {template!r} must start with '/'")
    out, pos = [], 0
    for m in _TEMPLATE_VAR.finditer(template):
        out.append(re.escape(template[pos:m.start()]).replace(r"\*", ".*"))
        out.append("[^/]+")
        pos = m.end()
    out.append(re.escape(template[pos:]).replace(r"\*", ".*"))
    return re.compile("".join(out) + "/?")


class Match(BaseModel):
    """Which requests a fault rule targets. Every given criterion must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    destination: str | None = Field(
        None, description="Scenario name of the destination (e.g. tickets); any when absent.")
    method: str | None = Field(None, description="HTTP method, case-insensitive (e.g. POST); any when absent.")
    path: str | None = Field(
        None, description="Path template: exact, '{name}' for one segment, '*' for any rest "
        "(e.g. /tickets/{id}). Query ignored.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Header name -> exact value ('*' = present). Names case-insensitive.")
    body: dict[str, Any] = Field(
        default_factory=dict, description="JSON body field (dotted path, e.g. customer.id), or form field (e.g. "
        "Action, of an AWS query API) -> value it must equal.")
    tool: str | None = Field(
        None, description="An MCP tool call of this tool: a POST whose JSON-RPC body is method tools/call with "
        "params.name equal to it (e.g. create_order).")
    per: Literal["run", "idempotency_key", "fingerprint"] = Field(
        "run", description="What the schedule counts: matching requests of the run, or those with the same "
        "idempotency key / body fingerprint.")
    nth: int | list[int] | None = Field(
        None, description="Fire on the nth matching request (1-based), or on each listed one.")
    first: int | None = Field(
        None, description="Fire on the first N matching requests (e.g. 2 = the first two attempts).")
    every: int | None = Field(None, description="Fire on every Nth matching request (N, 2N, ...).")
    probability: float | None = Field(
        None, description="Fire with this probability (0..1) on requests the schedule selects, drawn from the "
        "seeded stream.")

    @field_validator("method")
    @classmethod
    def _upper(cls, v: str | None) -> str | None:
        return v.upper() if v else v

    @field_validator("tool")
    @classmethod
    def _tool_name(cls, v: str | None) -> str | None:
        if v is not None and not v:
            raise ValueError("tool must name a tool (e.g. create_order), not be empty")
        return v

    @field_validator("path")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is not None:
            path_pattern(v)
        return v

    @field_validator("nth")
    @classmethod
    def _positive_nth(cls, v: int | list[int] | None) -> int | list[int] | None:
        values = v if isinstance(v, list) else [v] if v is not None else []
        if any(n < 1 for n in values) or (isinstance(v, list) and not v):
            raise ValueError(f"nth must be a positive count (1 = the first matching request), got {v!r}")
        return v

    @field_validator("first", "every")
    @classmethod
    def _positive(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"must be a positive count, got {v!r}")
        return v

    @field_validator("probability")
    @classmethod
    def _probability(cls, v: float | None) -> float | None:
        if v is not None and not 0.0 <= v <= 1.0:
            raise ValueError(f"probability must be between 0 and 1, got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_schedule(self) -> Match:
        given = [k for k in ("nth", "first", "every") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one schedule of nth / first / every, got {', '.join(given)}")
        if self.tool is not None and self.method not in (None, "POST"):
            raise ValueError(f"match.tool is a tools/call, which an MCP client POSTs; method {self.method!r} "
                             "never matches it (leave method out, or give POST)")
        return self


class FaultRule(BaseModel):
    """One fault: which requests (``match``) and what the proxy does to them (``action``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(..., min_length=1, description="Rule id, written to the proxy journal as rule_id.")
    match: Match = Field(default_factory=Match, description="Which requests this rule targets; all when empty.")
    action: Action = Field(
        ..., description="What to do: " + "; ".join(f"{a.name}: {a.doc}" for a in ACTIONS.values()))
    status: int | None = Field(
        None, ge=200, le=599, description="Status for synthetic_status / replace_status (e.g. 503, 429, 500).")
    retry_after: int | None = Field(
        None, ge=0, description="Retry-After seconds sent with synthetic_status / replace_status.")
    body: str | None = Field(
        None, description="Body sent with synthetic_status / replace_status (a short JSON error when absent); "
        f"the error text of tool_error_result / tool_error_after_commit ({DEFAULT_TOOL_ERROR!r} when absent).")
    hold_ms: int | None = Field(
        None, ge=0, description="hold_response: how long to hold the response (ms); set it past the client's "
        "timeout.")
    then: Literal["deliver", "drop"] = Field(
        "deliver", description="hold_response: after the hold, deliver the response or drop the connection.")
    keep_bytes: int = Field(
        0, ge=0, description="truncate_body: how many body bytes reach the client before the close.")
    delay_ms: int = Field(0, ge=0, description="latency: fixed delay before forwarding (ms).")
    jitter_ms: int = Field(
        0, ge=0, description="latency: extra uniform delay of up to this many ms, from the seeded stream.")

    @field_validator("status", mode="before")
    @classmethod
    def _final_status(cls, v: Any) -> Any:
        # a 1xx is not an answer: the client waits for the final one, which the proxy never sends
        if isinstance(v, int) and not isinstance(v, bool) and not 200 <= v <= 599:
            raise ValueError("the status of an answer the proxy gives must be a final status, 200-599 "
                             f"({_STATUS_HINT}); 1xx are informational, the client waits past them")
        return v

    @model_validator(mode="after")
    def _parameters_fit_action(self) -> FaultRule:
        action = ACTIONS[self.action]
        for name, hint in action.needs.items():
            if getattr(self, name) is None:
                raise ValueError(f"action {self.action} needs {name} ({hint})")
        if action.phase == "connection" and set(self.match.model_fields_set) - CONNECTION_MATCH:
            raise ValueError(f"action {self.action} happens before any request is read: "
                             f"match only on {', '.join(sorted(CONNECTION_MATCH))}")
        return self

    @property
    def family(self) -> str:
        """The fault's family, as scenarios are marked (``pytest -m rate_limited``): the action's, refined by the
        rule's parameters; a fault on a read (a lookup answered 502) is a read fault, whatever its action."""
        if self.match.method in SAFE_METHODS:
            return "read_fault"
        if self.action == "hold_response" and self.then == "deliver":
            return "slow_answer"
        if self.status == 429:
            return "rate_limited"
        return ACTIONS[self.action].family


def _check_parameters() -> None:
    """At import: every declared parameter is a rule field, every parameter field serves an action,
    and a required one has no default (else requiring it means nothing)."""
    fields = set(FaultRule.model_fields) - {"id", "match", "action"}
    for action in ACTIONS.values():
        unknown = sorted(set(action.parameters) - fields)
        if unknown:
            raise ValueError(f"fault action {action.name!r} reads {unknown}, which FaultRule does not have")
        defaulted = sorted(n for n in action.needs if FaultRule.model_fields[n].default is not None)
        if defaulted:
            raise ValueError(f"fault action {action.name!r} needs {defaulted}, but FaultRule gives a default")
        if set(action.explore) != set(action.parameters):
            raise ValueError(f"fault action {action.name!r} must say what exploration draws for each of its "
                             f"parameters {list(action.parameters)}, not {sorted(action.explore)}")
    unused = sorted(fields - {p for a in ACTIONS.values() for p in a.parameters})
    if unused:
        raise ValueError(f"FaultRule field(s) {unused} belong to no fault action in ACTIONS")


_check_parameters()


@dataclass(frozen=True)
class RpcFacts:
    """A JSON-RPC request (an MCP message): its method and id; for a tools/call the tool, its arguments and
    its ``params._meta``."""

    method: str
    id: int | str | None = None
    tool: str | None = None
    arguments: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None

    @property
    def is_tool_call(self) -> bool:
        return self.method == MCP_TOOL_CALL


def rpc_facts(doc: Any) -> RpcFacts | None:
    """The JSON-RPC request a parsed body holds, or None (a batch, a response, any other JSON)."""
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0" or not isinstance(doc.get("method"), str):
        return None
    rid = doc.get("id")
    params: dict[str, Any] = doc["params"] if isinstance(doc.get("params"), dict) else {}
    meta = params.get("_meta")
    tool = arguments = None
    if doc["method"] == MCP_TOOL_CALL:
        tool = params.get("name") if isinstance(params.get("name"), str) else None
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
    return RpcFacts(method=doc["method"], id=rid if isinstance(rid, (int, str)) and not isinstance(rid, bool)
                    else None, tool=tool, arguments=arguments, meta=meta if isinstance(meta, dict) else None)


@dataclass(frozen=True)
class RequestFacts:
    """What matching may look at in one request (headers keyed lower-case)."""

    destination: str
    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    fingerprint: str | None = None  # of the body, as the addon computed it

    @functools.cached_property  # computed once per request, however many rules ask
    def idempotency_key(self) -> str | None:
        rpc = self.rpc
        if rpc is not None and rpc.is_tool_call:
            return tool_call_key(self.headers, rpc)
        return idempotency_key(self.headers, self.json_body)

    @functools.cached_property
    def rpc(self) -> RpcFacts | None:
        """The JSON-RPC request of a JSON body; None for every other request (never parsed then)."""
        if not self.body:
            return None
        first = self.body[:1]
        if first in b" \t\r\n":  # rare: only then is the body copied to find its first character
            first = self.body.lstrip()[:1]
        if first != b"{":
            return None
        if self.headers.get("content-type", "application/json").split(";", 1)[0].strip() != "application/json":
            return None
        return rpc_facts(self.json_body)

    @functools.cached_property
    def body_fingerprint(self) -> str | None:
        """What the journal and ``per: fingerprint`` count: a tool call's arguments (as the agent's
        request_fingerprint and the destination's ledger fingerprint them), else the body's."""
        rpc = self.rpc
        if rpc is not None and rpc.is_tool_call:
            return fingerprint_of(dict(rpc.arguments or {}))
        return self.fingerprint

    @functools.cached_property
    def traceparent(self) -> str | None:
        """The header, else a JSON-RPC request's ``params._meta.traceparent`` (an MCP client's trace context)."""
        if self.headers.get(TRACEPARENT_HEADER):
            return self.headers[TRACEPARENT_HEADER]
        rpc = self.rpc
        value = rpc.meta.get(TRACEPARENT_HEADER) if rpc is not None and rpc.meta is not None else None
        return value if isinstance(value, str) else None

    @functools.cached_property
    def json_body(self) -> Any:
        """The body's fields: a JSON document, or a form's fields as a dict (Stripe's and AWS query
        APIs' bodies: a client token and a `match.body` can be there too); None when it is neither."""
        if not self.body:
            return None
        if self.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            try:
                return dict(urllib.parse.parse_qsl(self.body.decode("utf-8"), keep_blank_values=True))
            except (ValueError, UnicodeDecodeError):
                return None
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return None


def idempotency_key(headers: Mapping[str, str], json_body: Any) -> str | None:
    """The key a destination would deduplicate on: the header, else a body client token."""
    for name in IDEMPOTENCY_HEADERS:
        if headers.get(name):
            return headers[name]
    if isinstance(json_body, dict):
        for name in BODY_TOKEN_FIELDS:
            if isinstance(json_body.get(name), str):
                return json_body[name]
    return None


def tool_call_key(headers: Mapping[str, str], rpc: RpcFacts) -> str | None:
    """A tool call's key: the header, else a key argument, else ``params._meta.idempotencyKey``."""
    for name in IDEMPOTENCY_HEADERS:
        if headers.get(name):
            return headers[name]
    for source in (rpc.arguments, rpc.meta):
        if source is not None:
            for name in TOOL_KEY_FIELDS:
                if isinstance(source.get(name), str):
                    return source[name]
    return None


_MISSING = object()


def _dig(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def matches_criteria(match: Match, facts: RequestFacts) -> bool:
    """The static part of a match (everything but the schedule and probability). Pure."""
    if match.destination is not None and match.destination != facts.destination:
        return False
    if match.method is not None and match.method != facts.method.upper():
        return False
    if match.path is not None and not path_pattern(match.path).fullmatch(facts.path.split("?", 1)[0]):
        return False
    for name, want in match.headers.items():
        got = facts.headers.get(name.lower())
        if got is None or (want != "*" and got != want):
            return False
    if match.tool is not None:
        rpc = facts.rpc
        if facts.method.upper() != "POST" or rpc is None or not rpc.is_tool_call or rpc.tool != match.tool:
            return False
    if match.body:
        doc = facts.json_body
        if any(_dig(doc, k) != v for k, v in match.body.items()):
            return False
    return True


def schedule_fires(match: Match, count: int) -> bool:
    """Does the schedule select the ``count``-th matching request (1-based)? Pure."""
    if match.nth is not None:
        return count in match.nth if isinstance(match.nth, list) else count == match.nth
    if match.first is not None:
        return count <= match.first
    if match.every is not None:
        return count % match.every == 0
    return True


def check_rule_ids(rules: Sequence[FaultRule]) -> None:
    """ValueError when two rules share an id (the journal names the rule that fired by its id)."""
    ids = Counter(r.id for r in rules)
    dupes = sorted(i for i, n in ids.items() if n > 1)
    if dupes:
        raise ValueError(f"duplicate fault rule id(s): {', '.join(dupes)}; each rule needs its own id")


def refused_destinations(rules: Sequence[FaultRule]) -> set[str | None]:
    """Destinations whose connections ``refuse_connection`` refuses (None: every destination)."""
    return {r.match.destination for r in rules if r.action == "refuse_connection"}


class RuleBook:
    """The rules of one scenario run with their counters and seeded random streams.

    Same rules, same seed, same sequence of requests: same decisions. Not thread-safe; the addon
    calls it from the proxy's event loop only.
    """

    def __init__(self, rules: Sequence[FaultRule], *, seed: int | str = 0) -> None:
        check_rule_ids(rules)
        self.rules = list(rules)
        self.seed = seed
        self._counts: list[Counter[Any]] = [Counter() for _ in self.rules]
        self._random = [random.Random(f"{seed}:{r.id}") for r in self.rules]

    def decide(self, facts: RequestFacts) -> FaultRule | None:
        """Count this request against every rule; return the first rule that fires, if any."""
        fired: FaultRule | None = None
        for i, rule in enumerate(self.rules):
            if ACTIONS[rule.action].phase == "connection" or not matches_criteria(rule.match, facts):
                continue
            key = {"run": None, "idempotency_key": facts.idempotency_key,
                   "fingerprint": facts.body_fingerprint}[rule.match.per]
            self._counts[i][key] += 1
            if not schedule_fires(rule.match, self._counts[i][key]):
                continue
            if rule.match.probability is not None:
                # Drawn only for scheduled requests, so the stream depends on nothing else.
                if self._random[i].random() >= rule.match.probability:
                    continue
            if fired is None:
                fired = rule
        return fired

    def jitter(self, rule: FaultRule) -> float:
        """Seeded extra latency (seconds) for a latency rule."""
        i = self.rules.index(rule)
        return self._random[i].uniform(0, rule.jitter_ms) / 1000.0 if rule.jitter_ms else 0.0


def rules_json_schema() -> dict[str, Any]:
    """The published JSON Schema of one fault rule."""
    return FaultRule.model_json_schema()


def actions_markdown() -> str:
    """The README's table of fault actions, rendered from :data:`ACTIONS` (a test keeps them equal)."""
    rows = ["| `action` | reaches the destination | the client sees |", "|---|---|---|"]
    for action in ACTIONS.values():
        params = ", ".join(_parameter_markdown(p) for p in action.parameters)
        shown = f"`{action.name}`" + (f" ({params})" if params else "")
        rows.append(f"| {shown} | {action.forwarded} | {action.client_sees} |")
    return "\n".join(rows) + "\n"


def _parameter_markdown(name: str) -> str:
    annotation = FaultRule.model_fields[name].annotation
    if get_origin(annotation) is Literal:  # then: deliver/drop
        return f"`{name}: {'/'.join(get_args(annotation))}`"
    return f"`{name}`"
