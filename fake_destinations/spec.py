"""How a scenario declares a fake destination (``DestinationSpec``) and what the agent is told.

``DestinationSpec`` validates one entry of a scenario's ``destinations:`` mapping; unknown keys are
errors. Options left out take the service's defaults (see ``services.SERVICES``), filled in after
validation so that ``model_dump()`` is complete. ``describe(spec)`` is the agent-facing contract the
harness writes into the intents file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fake_destinations.services import ASYNC_STATUS_PATH, CREATE_ASYNC, SERVICES

if TYPE_CHECKING:
    ServiceName = str
else:  # one truth: the choices are the catalogue's names, in its order
    ServiceName = Literal[tuple(SERVICES)]
IdempotencyStyle = Literal["none", "stripe", "ietf", "client_token"]
FaultName = Literal["error_before_commit", "error_after_commit", "rate_limited", "drop_after_exec"]

IDEMPOTENCY_HEADER = "Idempotency-Key"
CLIENT_TOKEN_FIELD = "client_token"
CLIENT_REFERENCE_FIELD = "client_reference"
ACCOUNT_HEADER = "X-Account"
REPLAYED_HEADER = "Idempotent-Replayed"


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
                                      "reset; reads and requests refused by the rate_limit window not counted) gets the fault.")
    fault: FaultName = Field(description="error_before_commit: answer `status` without committing; "
                                         "error_after_commit: commit, then answer `status`; "
                                         "rate_limited: answer 429 with Retry-After; "
                                         "drop_after_exec (ssh only): run the command, then drop the "
                                         "connection before its exit status.")
    status: int | None = Field(None, ge=400, le=599, description="HTTP status of the error (default 500, "
                                                                 "429 for rate_limited).")
    retry_after_seconds: int = Field(1, ge=0, description="Retry-After for rate_limited.")


class DestinationSpec(BaseModel):
    """One fake destination of a scenario: a service and its idempotency contract."""

    model_config = ConfigDict(extra="forbid")

    service: ServiceName = Field(description="Which fake service to run: " + ", ".join(SERVICES) + ".")
    idempotency: IdempotencyStyle | None = Field(
        None, description="Deduplication contract. none: every write commits; stripe: optional "
        "Idempotency-Key header, first status and body stored (errors too) and replayed with "
        "Idempotent-Replayed: true, other payload 422; ietf: like stripe but the key is required (400) "
        "and a retry while the first is processing gets 409; client_token: EC2-like `client_token` body "
        "field, same token+params return the existing resource, other params IdempotentParameterMismatch. "
        "Default: the service's own.")
    retention_seconds: float | None = Field(
        86400.0, gt=0, description="How long a key is remembered (destination clock); a retry after "
        "that commits again. null: forever.")
    key_scope: Literal["global", "account", "path"] = Field(
        "global", description="Where a key is unique: global; account (per X-Account header); path "
        "(per method and path).")
    volatile_fields: list[str] = Field(
        default_factory=list, description="Top-level body fields ignored when comparing payloads "
        "(e.g. timestamps a client regenerates on each attempt).")
    processing_delay_seconds: float = Field(
        0.0, ge=0, le=60, description="Time a write stays in progress before it commits (real time).")
    async_completion_seconds: float = Field(
        1.0, ge=0, description="Async services: time (destination clock) before an accepted operation "
        "reports succeeded.")
    lookup: Literal["client_reference", "none"] | None = Field(
        None, description="client_reference: GET <collection>?client_reference=X lists matching "
        "resources; none: no search endpoint (404). Default: the service's own.")
    lookup_lag_seconds: float = Field(
        0.0, ge=0, description="Index lag: a resource appears in lookups only this long (destination "
        "clock) after its commit.")
    put_notifies: bool = Field(
        False, description="accounts: every PUT also sends a notification (an effect), even when the "
        "state did not change - the method name is no proof of idempotency.")
    rate_limit: RateLimit | None = Field(None, description="Fixed-window rate limit on writes.")
    failures: list[Failure] = Field(default_factory=list, description="Faults the destination produces itself.")

    @model_validator(mode="after")
    def _service_defaults(self) -> "DestinationSpec":
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
            if (failure.fault == "drop_after_exec") != (service.transport == "ssh"):
                valid = "drop_after_exec, error_before_commit" if service.transport == "ssh" else \
                    "error_before_commit, error_after_commit, rate_limited"
                raise ValueError(f"fault {failure.fault!r} is not available for service {self.service!r}; "
                                 f"valid: {valid}")
        if self.put_notifies and self.service != "accounts":
            raise ValueError(f"put_notifies applies to service 'accounts' only, not {self.service!r}")
        return self


def describe(spec: DestinationSpec | dict[str, Any]) -> dict[str, Any]:
    """The contract an agent reads to call this destination (see the module docstring)."""
    if not isinstance(spec, DestinationSpec):
        spec = DestinationSpec.model_validate(spec)
    service = SERVICES[spec.service]
    style = spec.idempotency
    contract: dict[str, Any] = {
        "service": spec.service,
        "idempotency": {
            "style": style,
            "header": IDEMPOTENCY_HEADER if style in ("stripe", "ietf") else None,
            "body_field": CLIENT_TOKEN_FIELD if style == "client_token" else None,
            "retention_seconds": spec.retention_seconds if style != "none" else None,
            "scope": spec.key_scope,
            "required": style == "ietf",
        },
        "lookup": None,
        "operations": {},
    }
    if spec.key_scope == "account" and style != "none":
        contract["idempotency"]["account_header"] = ACCOUNT_HEADER
    if spec.lookup == "client_reference":
        contract["lookup"] = {"method": "GET", "path": service.collection,
                              "query_param": CLIENT_REFERENCE_FIELD, "result_field": "items",
                              "lag_seconds": spec.lookup_lag_seconds}
    for op in service.operations:
        entry: dict[str, Any] = {"method": op.method, "path": op.path}
        if service.transport == "ssh":
            entry = {"method": "EXEC", "command": op.path}
            if "{operation_id}" in op.path:
                # the command creates a marker for the operation id before acting: a rerun is a no-op
                entry["dedup"] = "operation_marker"
        else:
            entry["client_reference_field"] = CLIENT_REFERENCE_FIELD
            entry["effect_ref_field"] = op.effect_ref_field
            if op.body_defaults:
                entry["body_defaults"] = dict(op.body_defaults)
        entry["required_params"] = list(op.required)
        contract["operations"][op.kind] = entry
    if any(op.action == CREATE_ASYNC for op in service.operations):
        contract["status"] = {"method": "GET", "path": ASYNC_STATUS_PATH}
    return contract


def json_schema() -> dict[str, Any]:
    """JSON Schema of one ``destinations:`` entry, for the published scenario schema."""
    return DestinationSpec.model_json_schema()
