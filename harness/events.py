"""The five audit events an agent writes (NDJSON), as pydantic models, and their published JSON Schema.

Field names follow docs/ARCHITECTURE.md ("Audit events"). Every model allows extra fields: the
contract lets a project add fields, never rename them.

Two ways to validate one line:

- ``validate_event(record)`` runs pydantic on a decoded object and returns the typed event or a
  readable error naming the field, the bad value and the valid choices;
- ``parse_line(text)`` validates the raw JSON text straight into a plain dict: the audit's hot path.
  orjson decodes the line and ``vouch_for`` checks the common shapes field by field (exact JSON types, no
  coercion needed); any line it cannot vouch for goes to pydantic (TypedDicts built from the same
  models, ``parse_line_pydantic``). Property tests keep all three in agreement.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, Union

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import from_json
from typing_extensions import TypedDict  # pydantic wants typing_extensions' TypedDict before Python 3.12

from harness.contract import AUDIT_LOG_ENV, EVENT_NAMES
from harness.model.operation import RETRY_REASONS as RETRY_REASON_NEEDS
from harness.ndjson import MAX_DEPTH, limit_error
from harness.resources import AUDIT_EVENT_SCHEMA_FILE, schema_file

DispatchState = Literal["not_sent", "sent_no_response", "response_received", "execution_error"]
OperationState = Literal["open", "succeeded", "failed", "unknown", "cancelled", "duplicate_effect_confirmed"]
ResolutionState = Literal["succeeded", "failed", "unknown", "cancelled", "duplicate_effect_confirmed"]
ObservationSource = Literal["lookup", "status_poll", "callback", "read_after_write", "operator"]
ApprovalDecision = Literal["approved", "denied"]
ApprovalScope = Literal["retry", "compensate", "close", "session"]

# The closed retry vocabulary, the operation model's (harness.model.operation.RETRY_REASONS). Checked by rule
# H008 (not by the schema gate H000), so that a log with an invented reason is still audited and the finding
# names the retry that broke the rule.
RETRY_REASONS = tuple(RETRY_REASON_NEEDS)

SCHEMA_PATH = schema_file(AUDIT_EVENT_SCHEMA_FILE)  # package data (harness.resources)


@lru_cache(maxsize=1 << 16)  # a log's lines share their seconds, and the rules read each line's several times
def timestamp_seconds(text: str) -> float | None:
    """Unix seconds of an RFC 3339 (ISO 8601) timestamp, None for a string that is not one ("yesterday").
    The one reading of a string ``ts``: the schema gate refuses what it cannot read, the rules order by it."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _readable_ts(value: float | str) -> float | str:
    if value.__class__ is str and timestamp_seconds(value) is None:
        raise ValueError("not a timestamp: give RFC 3339 (2026-12-04T10:00:00.123Z) or unix seconds (1764842400.123)")
    return value


def _ts_ok(value: Any) -> bool:
    """vouch_for's check of ``ts``: a float, or a string the rules can read as a time."""
    return value.__class__ is float or (value.__class__ is str and timestamp_seconds(value) is not None)


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    ts: Annotated[float | str, AfterValidator(_readable_ts)] = Field(description="RFC 3339 timestamp or unix seconds")
    session_id: str = Field(description="one run of the agent process")
    operation_id: str = Field(description="stable id of the intended external effect")
    seq: int | None = Field(None, description="hash chain: 1-based position in the log")
    prev_hash: str | None = Field(None, description="hash chain: hash of the previous event")
    hash: str | None = Field(None, description="hash chain: hash of this event (see harness.chain)")


class OperationEvent(_Event):
    """The agent committed to an intent: written before the first dispatch."""

    event: Literal["operation"]
    intent_id: str | None = None
    intent: dict[str, Any] | None = Field(None, description="{kind, destination, params}")
    idempotency_key: str | None = None
    payload_fingerprint: str | None = None
    state: OperationState = "open"
    supersedes_operation_id: str | None = None
    correction_of_operation_id: str | None = Field(
        None, description="the operation whose duplicate effect this one corrects; it waits for an operator")
    owner: str | None = None
    parent_operation_id: str | None = None


class AttemptEvent(_Event):
    """One real execution (one HTTP request, one SSH exec) and what the agent knows of its fate."""

    event: Literal["attempt"]
    attempt_id: str
    attempt_number: int | None = None
    destination: str | None = None
    method: str | None = None
    path: str | None = None
    idempotency_key: str | None = None
    request_fingerprint: str | None = None
    prior_request_fingerprint: str | None = None
    dispatch_state: DispatchState
    http_status: int | None = None
    retry_of_attempt_id: str | None = None
    retry_reason: str | None = Field(None, description="closed vocabulary: " + ", ".join(RETRY_REASONS))
    retry_decision: str | None = None
    attempt_budget_remaining: int | None = None
    retry_after_seconds: float | None = Field(None, description="Retry-After the destination asked for")
    effect_refs: list[str] | None = None
    traceparent: str | None = None
    error: str | None = None
    worker: str | None = None


class ObservationEvent(_Event):
    """Evidence gathered later: a lookup, a poll, a callback, an operator's look. Never an attempt."""

    event: Literal["observation"]
    observation_id: str
    source: ObservationSource = "lookup"
    method: str | None = None
    path: str | None = None
    found: bool | None = None
    effect_refs: list[str] | None = None
    lag_possible: bool | None = None


class ResolutionEvent(_Event):
    """The agent closes (or honestly leaves unknown) an operation, citing its evidence ids."""

    event: Literal["resolution"]
    state: ResolutionState
    effect_refs: list[str] | None = None
    evidence: list[str] | None = Field(None, description="attempt / observation / approval ids")
    reason: str | None = None
    correction_operation_id: str | None = None


class ApprovalEvent(_Event):
    """An operator's decision: retry, compensate or close an operation."""

    event: Literal["approval"]
    approval_id: str
    approver: str | None = None
    decision: ApprovalDecision
    scope: ApprovalScope
    reason: str | None = None
    retry_of_attempt_id: str | None = Field(
        None, description="scope retry: the attempt whose retry this approves (a per-call approval, H036)")
    prior_dispatch_state: DispatchState | None = Field(
        None, description="scope retry: that attempt's dispatch state, as the approver was shown it")
    recovery: str | None = Field(None, description="scope retry: the recovery the approver allowed, in words")
    holder: str | None = Field(
        None, description="scope session: the process granted authority (a session_id or worker id; default: this "
                          "event's session_id)")
    approved_at: float | None = Field(None, description="scope session: unix seconds the authority starts")
    revoked_at: float | None = Field(
        None, description="scope session: unix seconds it ends (logged again under the same approval_id when revoked)")


def _record_type(model: type[BaseModel]) -> Any:
    """A TypedDict with the model's fields (same types, same required set), validated straight from JSON
    into a plain dict: the audit's hot path, about 1.3x faster than parsing then validating the model."""
    def kind(f: Any) -> Any:  # the type with its validators (ts: readable as a time)
        return Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation

    fields = {name: (kind(f) if f.is_required() else NotRequired[kind(f)]) for name, f in model.model_fields.items()}
    record_name = model.__name__.replace("Event", "Record")
    record = TypedDict(record_name, fields)  # type: ignore[misc]  # built at run time, from a computed name
    record.__pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[attr-defined]  # read by pydantic
    return record


AuditEvent = Annotated[
    OperationEvent | AttemptEvent | ObservationEvent | ResolutionEvent | ApprovalEvent,
    Field(discriminator="event"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AuditEvent)
# The same five shapes as plain dicts (see _record_type); a test keeps them accepting what the models accept.
# A union built at run time, of types built at run time: no static type, hence Any.
_RECORD_UNION: Any = Union[*(_record_type(m) for m in (OperationEvent, AttemptEvent, ObservationEvent,
                                                       ResolutionEvent, ApprovalEvent))]
RECORD_ADAPTER: TypeAdapter[Any] = TypeAdapter(Annotated[_RECORD_UNION, Field(discriminator="event")])


def parse_line(text: str | bytes) -> tuple[dict[str, Any] | None, str | None]:
    """One NDJSON line -> (validated event dict, None) or (None, reason). Extra fields are kept.

    The same answer as ``parse_line_pydantic``, about 3x faster on lines whose fields already hold
    exactly the types the models want (a property test holds the two equal on any text).
    """
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return parse_line_pydantic(text)
    if type(record) is dict and vouch_for(record):
        return record, None
    return parse_line_pydantic(text)


def parse_line_pydantic(text: str | bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``parse_line`` through pydantic alone: the reference the fast path is tested against. A line
    beyond the limits (``harness.ndjson.limit_error``: nesting, integer size, lone surrogates) is
    malformed before pydantic sees it."""
    beyond = limit_error(text)
    if beyond is not None:
        return None, beyond
    try:
        return RECORD_ADAPTER.validate_json(text), None
    except ValidationError:
        pass
    try:
        value = from_json(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    return None, validate_event(value)[1] or "does not fit the audit event schema"


# How vouch_for checks one field: the exact Python types orjson may give for a value pydantic would keep
# unchanged. Anything else (an int for a float, 1 for a bool, a number for a string) goes to pydantic,
# which may coerce it or reject it with its own message.
STR, STR_OR_NONE, INT_OR_NONE, BOOL_OR_NONE, FLOAT_OR_NONE, TS, STRS_OR_NONE, DICT_OR_NONE = range(8)
_NONE = type(None)
_FIELD_TYPES = {STR: (str,), STR_OR_NONE: (str, _NONE), INT_OR_NONE: (int, _NONE), BOOL_OR_NONE: (bool, _NONE),
                FLOAT_OR_NONE: (float, _NONE)}


def _vouch_plan(model: type[BaseModel]) -> tuple[dict[str, Any], frozenset[str]]:
    """field -> check, and the required fields, read from the model so the two never drift apart."""
    plan: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if name == "event":
            plan[name] = frozenset(annotation.__args__)  # type: ignore[union-attr]
            continue
        args = getattr(annotation, "__args__", ())
        literal = next((a for a in (annotation, *args) if getattr(a, "__origin__", None) is Literal), None)
        if literal is not None:
            plan[name] = frozenset(literal.__args__)  # a set of the allowed strings (None is never allowed)
        elif annotation == (float | str):
            plan[name] = TS
        elif annotation is str:
            plan[name] = STR
        elif annotation == (str | None):
            plan[name] = STR_OR_NONE
        elif annotation == (int | None):
            plan[name] = INT_OR_NONE
        elif annotation == (bool | None):
            plan[name] = BOOL_OR_NONE
        elif annotation == (float | None):
            plan[name] = FLOAT_OR_NONE
        elif annotation == (list[str] | None):
            plan[name] = STRS_OR_NONE
        elif annotation == (dict[str, Any] | None):
            plan[name] = DICT_OR_NONE
        else:  # a new field type: teach vouch_for about it (a test fails until then)
            raise TypeError(f"{model.__name__}.{name}: no fast check for {annotation!r}")
    required = frozenset(name for name, info in model.model_fields.items() if info.is_required())
    return plan, required


def plain_json(value: Any, depth: int = 1) -> bool:
    """True when an arbitrary JSON value holds no float: orjson turns an integer beyond 64 bits into a
    float where pydantic keeps the int, so a float in free-form data is left to pydantic. Nor is a value
    nested deeper than ``MAX_DEPTH`` levels (orjson decodes up to 1024): ``parse_line_pydantic`` applies
    the limits and says so, and the recursion here stays bounded."""
    kind = type(value)
    if kind is dict:
        if depth >= MAX_DEPTH:
            return False
        for item in value.values():
            if not plain_json(item, depth + 1):
                return False
    elif kind is list:
        if depth >= MAX_DEPTH:
            return False
        for item in value:
            if not plain_json(item, depth + 1):
                return False
    elif kind is float:
        return False
    return True


def vouch_for(record: dict[str, Any]) -> bool:
    """Does this decoded line fit its event model exactly as it stands (so pydantic would return it as is)?

    Lines of one shape (the same keys in the same order) get one checker, written for that shape
    (``_shape_checker``): about 1.5x faster than walking the plan field by field."""
    shape = tuple(record)
    checker = _SHAPE_CHECKERS.get(shape)
    if checker is None:
        event = record.get("event")
        if type(event) is not str or event not in VOUCH_PLANS:
            return False
        if len(_SHAPE_CHECKERS) >= _MAX_SHAPES:  # a log of ever new shapes: check field by field
            return vouch_for_fields(record, *VOUCH_PLANS[event])
        checker = _SHAPE_CHECKERS[shape] = _shape_checker(shape, event)
    return checker(record)


_MAX_SHAPES = 1024
_SHAPE_CHECKERS: dict[tuple[str, ...], Any] = {}
# what each check is, as an expression over the value ``v`` (the STR... codes above)
_CHECK_SOURCE = {
    STR: "v.__class__ is str", STR_OR_NONE: "(v is None or v.__class__ is str)",
    INT_OR_NONE: "(v is None or v.__class__ is int)", BOOL_OR_NONE: "(v is None or v.__class__ is bool)",
    FLOAT_OR_NONE: "(v is None or v.__class__ is float)", TS: "_ts_ok(v)",
    STRS_OR_NONE: "(v is None or _strs(v))", DICT_OR_NONE: "(v is None or (v.__class__ is dict and plain_json(v)))",
}


def _strs(value: Any) -> bool:
    if value.__class__ is not list:
        return False
    for item in value:
        if item.__class__ is not str:
            return False
    return True


def _shape_checker(shape: tuple[str, ...], event: str) -> Any:
    """A function checking a record of exactly these keys, in this order, against the event's plan."""
    fields, required = VOUCH_PLANS[event]
    if not required <= set(shape):
        return lambda record: False
    names = [f"v{i}" for i in range(len(shape))]
    tests = []
    scope: dict[str, Any] = {"_strs": _strs, "plain_json": plain_json, "_ts_ok": _ts_ok}
    for name, key in zip(names, shape, strict=True):
        check = fields.get(key)
        if check is None:
            tests.append(f"plain_json({name})")
        elif check.__class__ is frozenset:
            scope[f"allowed_{name}"] = check
            tests.append(f"({name}.__class__ is str and {name} in allowed_{name})")
        else:
            tests.append(_CHECK_SOURCE[check].replace("v", name))
    source = (f"def check(record):\n    {', '.join(names)}, = record.values()\n"
              f"    return bool({' and '.join(tests) or 'True'})\n")
    exec(source, scope)  # noqa: S102 -- built from the models' own field table, never from the log
    return scope["check"]


def vouch_for_fields(record: dict[str, Any], fields: dict[str, Any], required: frozenset[str]) -> bool:
    if not required <= record.keys():
        return False
    types = _FIELD_TYPES
    for name, value in record.items():
        check = fields.get(name)
        if check is None:  # an extra field: kept as decoded
            if not plain_json(value):
                return False
        elif check.__class__ is int:
            if check == STRS_OR_NONE:
                if value is not None and not _strs(value):
                    return False
            elif check == DICT_OR_NONE:
                if value is not None and (type(value) is not dict or not plain_json(value)):
                    return False
            elif check == TS:
                if not _ts_ok(value):
                    return False
            elif type(value) not in types[check]:
                return False
        elif type(value) is not str or value not in check:  # a Literal
            return False
    return True


def validate_event(record: Any) -> tuple[BaseModel | None, str | None]:
    """The typed event, or None and a one-line reason naming the bad key, value and valid choices."""
    if not isinstance(record, dict):
        return None, f"expected a JSON object, got {type(record).__name__}"
    event = record.get("event")
    if event not in EVENT_NAMES:
        return None, f"field 'event' is {event!r}; valid: {', '.join(EVENT_NAMES)}"
    try:
        return EVENT_ADAPTER.validate_python(record), None
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"][1:]) or "(event)"  # loc[0] is the union tag
            value = "missing" if err["type"] == "missing" else f"{err.get('input')!r}"
            problems.append(f"field {loc!r} {value}: {err['msg'].removeprefix('Value error, ')}")  # ours say why
        return None, f"{event} event: " + "; ".join(problems)


VOUCH_PLANS: dict[str, tuple[dict[str, Any], frozenset[str]]] = {
    model.model_fields["event"].annotation.__args__[0]: _vouch_plan(model)  # type: ignore[union-attr]
    for model in (OperationEvent, AttemptEvent, ObservationEvent, ResolutionEvent, ApprovalEvent)}


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of one audit log line."""
    schema = EVENT_ADAPTER.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://retry-harness.invalid/schemas/audit-event.schema.json"
    schema["title"] = f"Audit event (one NDJSON line of {AUDIT_LOG_ENV})"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the JSON Schema file that ships with the package (a test keeps it up to date)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(), encoding="utf-8")
    return path


if __name__ == "__main__":  # python -m harness.events: regenerate the published schema
    print(write_schema())
