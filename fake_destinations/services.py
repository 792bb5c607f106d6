"""The service catalogue: each fake destination declared in a few lines on the shared core.

Plain dataclasses (no pydantic) because the destination process imports this at start-up and
start-up is on every scenario's critical path. ``spec.py`` builds the validated scenario model and
the agent-facing contract from the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

IdempotencyStyle = Literal["none", "stripe", "ietf", "client_token"]
# a destination's style, as its contract says it: an MCP tool server's natural_key too (from its tools)
ContractStyle = Literal["none", "stripe", "ietf", "client_token", "natural_key"]
LookupStyle = Literal["client_reference", "none"]

# What a declared operation does to the destination's state.
CREATE = "create"              # POST to a collection: a new resource and a new effect
CREATE_ASYNC = "create_async"  # POST answered 202 with an operation to poll
SET_STATE = "set_state"        # PUT: naturally idempotent; an effect only when the state changes
DELETE = "delete"              # DELETE: naturally idempotent; the second call answers 404
EXEC = "exec"                  # an SSH command


@dataclass(frozen=True)
class Operation:
    kind: str                  # the intent kind an agent's intent names
    method: str
    path: str                  # may hold {param} placeholders filled from the intent's params
    action: str
    effect_kind: str
    required: tuple[str, ...] = ()
    body_defaults: dict[str, Any] = field(default_factory=dict)
    effect_ref_field: str = "id"
    # SSH: the command's family (harness.contract.COMMAND_FAMILIES) and, for a set-state command, the
    # condition under which a rerun converges instead of acting again
    family: str | None = None
    convergence: str | None = None
    convergence_exit_status: int | None = None  # the exit status that says the state already holds


@dataclass(frozen=True)
class Service:
    name: str
    collection: str            # "/tickets": lookup is GET collection, read is GET collection/{id}
    id_prefix: str
    operations: tuple[Operation, ...]
    idempotency: IdempotencyStyle  # default idempotency style
    lookup: LookupStyle            # default lookup
    initial_status: str = "created"
    transport: str = "http"


API_SERVICE = "api"
MCP_SERVICE = "mcp"

SERVICES: dict[str, Service] = {s.name: s for s in (
    Service("tickets", "/tickets", "tkt", (
        Operation("create_ticket", "POST", "/tickets", CREATE, "ticket_created", ("title", "project")),
    ), idempotency="stripe", lookup="client_reference", initial_status="open"),
    Service("payments", "/payments", "pay", (
        Operation("create_payment", "POST", "/payments", CREATE, "payment_created", ("amount", "currency")),
    ), idempotency="stripe", lookup="client_reference", initial_status="succeeded"),
    Service("accounts", "/accounts", "acct", (
        Operation("disable_account", "PUT", "/accounts/{account_id}", SET_STATE, "account_updated",
                  ("account_id",), body_defaults={"status": "disabled"}, effect_ref_field="revision"),
        Operation("delete_account", "DELETE", "/accounts/{account_id}", DELETE, "account_deleted",
                  ("account_id",), effect_ref_field="revision"),
    ), idempotency="none", lookup="none", initial_status="active"),
    Service("webhooks", "/deliveries", "dlv", (
        Operation("deliver_webhook", "POST", "/deliveries", CREATE, "webhook_delivered", ("url", "event")),
    ), idempotency="none", lookup="client_reference", initial_status="delivered"),
    Service("vms", "/instances", "i", (
        Operation("run_instance", "POST", "/instances", CREATE, "instance_launched", ("image",)),
    ), idempotency="client_token", lookup="client_reference", initial_status="pending"),
    Service("email", "/messages", "msg", (
        Operation("send_email", "POST", "/messages", CREATE, "email_sent", ("to", "subject")),
    ), idempotency="none", lookup="none", initial_status="sent"),
    Service("deployments", "/deployments", "dep", (
        Operation("create_deployment", "POST", "/deployments", CREATE_ASYNC, "deployment_created",
                  ("service", "version")),
    ), idempotency="ietf", lookup="client_reference", initial_status="pending"),
    Service("ssh", "", "cmd", (
        Operation("create_user", "EXEC", "create-user {username}", EXEC, "ssh_exec", ("username",),
                  family="set_state", convergence="exits 9 without acting when the user already exists",
                  convergence_exit_status=9),
        Operation("install_key", "EXEC", "install-key {username} {public_key}", EXEC, "ssh_exec",
                  ("username", "public_key"), family="append"),
        Operation("restart_service", "EXEC", "restart-service {service}", EXEC, "ssh_exec", ("service",),
                  family="destructive"),  # interrupts the service on every call
        Operation("deploy_release", "EXEC", "deploy {release} --operation-id {operation_id}", EXEC,
                  "ssh_exec", ("release", "operation_id"), family="set_state"),  # its marker is the dedup record
    ), idempotency="none", lookup="none", transport="ssh"),
    # a generic destination: its routes, contract and answers come from the scenario's `api:` declaration
    # (fake_destinations.api_spec); nothing of it is fixed here
    Service(API_SERVICE, "", "", (), idempotency="none", lookup="none"),
    # an MCP tool server: its tools come from the scenario's `tools:` (fake_destinations.spec.McpTool),
    # served by fake_destinations.mcp
    Service(MCP_SERVICE, "", "", (), idempotency="none", lookup="none", transport="mcp"),
)}

ASYNC_STATUS_PATH = "/operations/{id}"
