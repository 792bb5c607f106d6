"""Hand-built evidence of MCP runs (docs/contract.md, "MCP"): an MCP destination's context, the JSON-RPC
flows a real client sends through the proxy (``initialize``, ``notifications/initialized``, ``tools/list``,
then ``tools/call``) with the journal's ``rpc`` field, and the ledger rows the fake MCP server writes.

One story, three consistent sources, as ``EvidenceBuilder`` does for HTTP; a test for a lie then changes
one source only.
"""

from __future__ import annotations

import json
from typing import Any

from harness.fingerprint import fingerprint
from tests.common.evidence_builder import EvidenceBuilder

ARGS = {"item": "widget", "quantity": 2}
HINTS = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True}
STYLES = {"none": ("none", None), "argument": ("client_token", "idempotency_key"),
          "natural_key": ("natural_key", "client_reference")}


def mcp_destination(idempotency: str = "none", annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    """The context.json entry of an MCP destination ``orders``: tool create_order (its effect, idempotency and
    annotations as given), lookup tool find_orders, and a tool without effect, ping."""
    hints = dict(HINTS if annotations is None else annotations)
    style, field = STYLES[idempotency]
    spec = {"name": "orders", "service": "mcp", "endpoint": "/mcp", "tools": {
        "create_order": {"effect": "order_created", "required": ["item", "quantity"], "idempotency": idempotency,
                         "annotations": hints},
        "find_orders": {"lookup": "create_order", "annotations": {"readOnlyHint": True}},
        "ping": {"annotations": {"readOnlyHint": True}}}}
    contract = {"service": "mcp", "transport": "mcp", "endpoint": "/mcp",
                "idempotency": {"style": style, "header": None, "body_field": field, "retention_seconds": None,
                                "scope": "global", "required": False},
                "lookup": {"method": "tools/call", "path": "find_orders", "query_param": "client_reference",
                           "result_field": "items", "lag_seconds": 0.0},
                "operations": {"create_order": {"method": "tools/call", "path": "create_order",
                                                "client_reference_field": "client_reference", "effect_ref_field": "id",
                                                "required_params": ["item", "quantity"], "annotations": hints}}}
    return {"spec": spec, "contract": contract}


class MCPStory:
    """An MCP run told through an ``EvidenceBuilder``: the destination ``orders`` in its context, the
    intent ``int_1`` (create_order), and the flows of each step."""

    def __init__(self, b: EvidenceBuilder, idempotency: str = "none", annotations: dict[str, Any] | None = None,
                 op: str = "op_1") -> None:
        self.b, self.op, self.rpc_id = b, op, 0
        self.style, self.key_field = STYLES[idempotency]
        b.context["destinations"]["orders"] = mcp_destination(idempotency, annotations)
        b.intent(kind="create_order", destination="orders", params=dict(ARGS))
        self.key = f"idem-{op}" if self.key_field == "idempotency_key" else op if self.key_field else None
        b.event("operation", op, intent_id="int_1", state="open", idempotency_key=self.key,
                intent={"kind": "create_order", "destination": "orders", "params": dict(ARGS)})

    def arguments(self) -> dict[str, Any]:
        args = {**ARGS, "client_reference": self.op}
        if self.key_field == "idempotency_key":
            args["idempotency_key"] = self.key
        return args

    def flow(self, method: str, *, tool: str | None = None, arguments: dict[str, Any] | None = None,
             lost: bool = False, is_error: bool = False, outcome: str = "read", effect: str | None = None,
             replay: bool = False, traceparent: str | None = None, reached: bool = True) -> str:
        """One JSON-RPC request through the proxy (journal ``rpc``) and, when it reached the server, its
        ledger row (and effect)."""
        b = self.b
        self.rpc_id += 1
        flow_id = f"flow_{len(b.journal) + 1}"
        fp = fingerprint(arguments) if arguments is not None else None
        key = (arguments or {}).get(self.key_field) if self.key_field and tool == "create_order" else None
        if reached:
            b.requests.append({
                "seq": len(b.requests) + 1, "destination": "orders", "method": method,
                "path": tool or "/mcp", "query": None, "idempotency_key": key,
                "client_reference": (arguments or {}).get("client_reference"), "payload_fingerprint": fp,
                "flow_id": flow_id, "traceparent": traceparent, "status": 200, "outcome": outcome,
                "effect_ref": effect, "received_at": b.tick(0.01), "kind": tool,
                "params": json.dumps(arguments, sort_keys=True) if arguments is not None else None})
            if effect and not replay:
                b.effects.append({"seq": len(b.effects) + 1, "destination": "orders", "effect_ref": effect,
                                  "kind": "order_created", "operation_key": key,
                                  "client_reference": (arguments or {}).get("client_reference"),
                                  "payload_fingerprint": fp, "request_seq": len(b.requests), "flow_id": flow_id,
                                  "replay": 0, "committed_at": b.clock,
                                  "committed_params": json.dumps(arguments, sort_keys=True)})
        notification = method.startswith("notifications/")
        b.journal.append({
            "seq": len(b.journal) + 1, "flow_id": flow_id, "ts_request": b.tick(0.01), "ts_done": b.tick(0.01),
            "destination": "orders", "method": "POST", "path": "/mcp", "query": None, "headers": {},
            # the proxy knows a key argument by its name; a natural key is an ordinary argument to it
            "body_fingerprint": fp, "idempotency_key": key if self.key_field == "idempotency_key" else None,
            "traceparent": traceparent,
            "rule_id": "drop" if lost else None, "fault": "drop_response_after_commit" if lost else None,
            "forwarded": reached, "upstream_status": (202 if notification else 200) if reached else None,
            "client_outcome": "connection_closed" if lost else "response",
            "client_status": None if lost else 202 if notification else 200, "client_retry_after": None,
            "rpc": {"method": method, "id": None if notification else self.rpc_id, "tool": tool,
                    "is_error": None if lost or tool is None else is_error}})
        return flow_id

    def connect(self) -> None:
        """What ``ClientSession.initialize()`` and ``list_tools()`` send: protocol, never attempts."""
        self.flow("initialize")
        self.flow("notifications/initialized")
        self.flow("tools/list")

    def call(self, attempt_id: str, dispatch_state: str, *, effect: str | None = None, lost: bool = False,
             is_error: bool = False, replay: bool = False, log: bool = True, arguments: dict[str, Any] | None = None,
             tool: str = "create_order", **fields: Any) -> None:
        """An attempt of create_order: its flow (and row) and its log line, as the reference agent logs it."""
        args = arguments if arguments is not None else self.arguments()
        traceparent = f"00-{'a' * 32}-{len(self.b.journal):016x}-01"
        outcome = "replayed" if replay else "committed" if effect else "rejected" if is_error else "read"
        self.flow("tools/call", tool=tool, arguments=args, lost=lost, is_error=is_error and not effect,
                  outcome=outcome, effect=effect, replay=replay, traceparent=traceparent)
        if is_error and effect:  # tool_error_after_commit: committed, the client got an error result instead
            self.b.journal[-1]["rpc"]["is_error"] = True
            self.b.journal[-1]["fault"] = "tool_error_after_commit"
        if log:
            answered = dispatch_state == "response_received"
            self.b.event("attempt", self.op, attempt_id=attempt_id, dispatch_state=dispatch_state,
                         destination="orders", method="tools/call", path=tool, idempotency_key=self.key,
                         request_fingerprint=fingerprint(args), traceparent=traceparent,
                         http_status=200 if answered else None, tool_error=True if is_error and answered else None,
                         effect_refs=[effect] if effect and answered and not is_error else None, **fields)

    def lookup(self, observation_id: str, found: list[str], log: bool = True) -> None:
        args = {"client_reference": self.op}
        self.flow("tools/call", tool="find_orders", arguments=args)
        if log:
            self.b.event("observation", self.op, observation_id=observation_id, source="lookup",
                         method="tools/call", path="find_orders", found=bool(found), effect_refs=found or None,
                         lag_possible=False if not found else None)

    def resolve(self, state: str, effects: list[str], evidence: list[str], **fields: Any) -> None:
        self.b.resolution(self.op, state, effects=effects, evidence=evidence, **fields)


def reference_mcp_lookup_run(b: EvidenceBuilder, **destination: Any) -> MCPStory:
    """The reference agent on mcp_tool_result_lost: connect, the result lost after the commit, the lookup
    tool finds the order, closed on it."""
    s = MCPStory(b, **destination)
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_number=1, attempt_budget_remaining=2)
    s.connect()  # a new session for the lookup: protocol again
    s.lookup("obs_1", ["ord_1"])
    s.resolve("succeeded", ["ord_1"], ["att_1", "obs_1"])
    return s
