"""Builds evidence folders (agent log, proxy journal, ledger dump, context) for checker tests.

Each logged attempt can also put what the wire and the destination saw into the journal and the
ledger, so a test states one story and gets the three sources of truth consistent with it; a test
for a lie then changes one source only. ``request`` tells a black-box story (``black_box()``: a program
that writes no audit log): what the wire and the ledger saw of one request, no log line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.checker import Verdict, check
from harness.evidence import load_evidence
from harness.fingerprint import fingerprint

TICKETS_CONTRACT = {
    "service": "tickets",
    "idempotency": {"style": "stripe", "header": "Idempotency-Key", "body_field": None,
                    "retention_seconds": 86400, "scope": "account"},
    "lookup": {"method": "GET", "path": "/tickets", "query_param": "client_reference", "result_field": "id"},
    "operations": {"create_ticket": {"method": "POST", "path": "/tickets", "client_reference_field": "client_reference",
                                     "effect_ref_field": "id"}},
}
WEBHOOK_CONTRACT = {
    "service": "webhook",
    "idempotency": {"style": "none", "header": None, "body_field": None, "retention_seconds": None, "scope": None},
    "lookup": None,
    "operations": {"notify": {"method": "POST", "path": "/hooks", "client_reference_field": None,
                              "effect_ref_field": "delivery_id"}},
}
SSH_CONTRACT = {
    "service": "ssh",
    "idempotency": {"style": "none", "header": None, "body_field": None, "retention_seconds": None, "scope": None},
    "lookup": None,
    "operations": {"install_key": {"method": "EXEC", "command": "install-key {username} {public_key}",
                                   "family": "append"},
                   "create_user": {"method": "EXEC", "command": "create-user {username}", "family": "set_state",
                                   "convergence": "exits 9 when the user exists"},
                   "restart_service": {"method": "EXEC", "command": "restart-service {service}",
                                       "family": "destructive"}},
}
PAYLOAD = {"title": "disk full", "client_reference": "int_1"}
KINDS = {("tickets", "/tickets"): "create_ticket", ("webhook", "/hooks"): "notify"}  # the routes' operation kinds


class EvidenceBuilder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.events: list[dict[str, Any]] = []
        self.journal: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.effects: list[dict[str, Any]] = []
        self.context: dict[str, Any] = {"scenario": "test", "destinations": {
            "tickets": {"spec": {"name": "tickets"}, "contract": TICKETS_CONTRACT},
            "webhook": {"spec": {"name": "webhook"}, "contract": WEBHOOK_CONTRACT},
            "web1": {"spec": {"name": "web1"}, "contract": SSH_CONTRACT}},
            "intents": [], "secrets": {}, "agent": {"command": "test", "exit_status": 0, "timed_out": False}}
        self.clock = 1_700_000_000.0
        self.raw_lines: list[str] = []
        self.stdout_lines: list[str] = []  # the program's stdout (agent.stdout): its report lines, in black-box mode

    def tick(self, seconds: float = 0.1) -> float:
        self.clock += seconds
        return self.clock

    # -- the agent's log
    def event(self, event: str, operation_id: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "ts": self.tick(), "session_id": "ses_1", "operation_id": operation_id}
        record.update({k: v for k, v in fields.items() if v is not None})
        self.events.append(record)
        return record

    def intent(self, intent_id: str = "int_1", kind: str = "create_ticket", destination: str = "tickets",
               params: dict[str, Any] | None = None) -> None:
        self.context["intents"].append({"intent_id": intent_id, "kind": kind, "destination": destination,
                                        "params": params or dict(PAYLOAD)})

    def operation(self, operation_id: str = "op_1", intent_id: str = "int_1", destination: str = "tickets",
                  key: str | None = "idem-op_1", **fields: Any) -> dict[str, Any]:
        return self.event("operation", operation_id, intent_id=intent_id, state="open", idempotency_key=key,
                          intent={"kind": "create_ticket" if destination == "tickets" else "notify",
                                  "destination": destination, "params": dict(PAYLOAD)}, **fields)

    def attempt(self, operation_id: str, attempt_id: str, dispatch_state: str, *, key: str | None = "idem-op_1",
                destination: str = "tickets", method: str = "POST", path: str | None = None,
                payload: dict[str, Any] | None = None, log: bool = True, wire: bool = True,
                lost: bool = False, effect: str | None = None, replay: bool = False, status: int = 201,
                reached: bool = True, client_outcome: str | None = None, wire_key: str | None = "same",
                kind: str | None = None, retry_after: str | None = None,
                **fields: Any) -> dict[str, Any] | None:
        """Log an attempt and (wire=True) what the proxy and the destination saw of it."""
        path = path or ("/tickets" if destination == "tickets" else "/hooks")
        fp = fingerprint(payload if payload is not None else PAYLOAD) if method != "GET" else None
        record = None
        ssh = method == "EXEC"  # the proxy does not front SSH hosts: their ledger rows stand in for the wire
        if wire:
            flow_id = None if ssh else f"flow_{len(self.journal) + 1}"
            sent_key = key if wire_key == "same" else wire_key
            if reached:
                outcome = ("replayed" if replay else "committed" if effect else "read" if method == "GET"
                           else "rejected")
                kind = kind or (None if method == "GET" else KINDS.get((destination, path)))
                sent = payload if payload is not None else PAYLOAD
                self.requests.append({"seq": len(self.requests) + 1, "destination": destination, "method": method,
                                      "path": path, "query": None, "idempotency_key": sent_key,
                                      "client_reference": None, "payload_fingerprint": fp, "flow_id": flow_id,
                                      "traceparent": fields.get("traceparent"), "status": status, "outcome": outcome,
                                      "effect_ref": effect, "received_at": self.tick(0.01), "kind": kind,
                                      "params": json.dumps(sent, sort_keys=True) if kind else None})
                if effect and not replay:
                    self.effects.append({"seq": len(self.effects) + 1, "destination": destination, "effect_ref": effect,
                                         "kind": "ticket_created", "operation_key": sent_key, "client_reference": None,
                                         "payload_fingerprint": fp, "request_seq": len(self.requests),
                                         "flow_id": flow_id, "replay": 0, "committed_at": self.clock})
            if not ssh:
                self.journal.append({"seq": len(self.journal) + 1, "flow_id": flow_id, "ts_request": self.tick(0.01),
                                     "ts_done": self.tick(0.01), "destination": destination, "method": method,
                                     "path": path,
                                     "query": None, "headers": {}, "body_fingerprint": fp, "idempotency_key": sent_key,
                                     "traceparent": fields.get("traceparent"), "rule_id": "drop" if lost else None,
                                     "fault": "drop_response" if lost else None, "forwarded": reached,
                                     "upstream_status": status if reached else None,
                                     "client_outcome": client_outcome or ("connection_closed" if lost else "response"),
                                     "client_status": None if lost else status, "client_retry_after": retry_after})
        if log:
            answered = dispatch_state == "response_received"
            if ssh and answered:  # an SSH command answers with its exit status, not an HTTP one
                fields.setdefault("exit_status", status)
            record = self.event("attempt", operation_id, attempt_id=attempt_id, dispatch_state=dispatch_state,
                                idempotency_key=key, destination=destination, method=method, path=path,
                                request_fingerprint=fp,
                                http_status=None if not answered or ssh else status,
                                effect_refs=[effect] if effect and dispatch_state == "response_received" else None,
                                **fields)
        return record

    def request(self, key: str | None = "idem-op_1", **wire: Any) -> None:
        """Black-box: one write of a program that keeps no log, as the wire and the ledger saw it
        (``attempt``'s wire keywords)."""
        self.attempt("-", "-", "-", key=key, log=False, **wire)

    def black_box(self) -> EvidenceBuilder:
        """Judge this story without the log, as the engine does a scenario with ``agent_log: none``."""
        self.context["mode"] = "black_box"
        return self

    def observation(self, operation_id: str, observation_id: str, *, found: bool, effect: str | None = None,
                    wire: bool = True, source: str = "lookup", **fields: Any) -> dict[str, Any]:
        if wire:
            flow_id = f"flow_{len(self.journal) + 1}"
            self.journal.append({"seq": len(self.journal) + 1, "flow_id": flow_id, "ts_request": self.tick(0.01),
                                 "ts_done": self.tick(0.01), "destination": "tickets", "method": "GET",
                                 "path": "/tickets", "query": "client_reference=int_1", "headers": {},
                                 "body_fingerprint": None, "idempotency_key": None, "traceparent": None,
                                 "rule_id": None, "fault": None, "forwarded": True, "upstream_status": 200,
                                 "client_outcome": "response", "client_status": 200})
        return self.event("observation", operation_id, observation_id=observation_id, source=source, method="GET",
                          path="/tickets", found=found, effect_refs=[effect] if effect else None, **fields)

    def resolution(self, operation_id: str, state: str, *, effects: list[str] | None = None,
                   evidence: list[str] | None = None, **fields: Any) -> dict[str, Any]:
        return self.event("resolution", operation_id, state=state, effect_refs=effects, evidence=evidence, **fields)

    # -- writing and judging
    def write(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(e, sort_keys=True) for e in self.events] + self.raw_lines
        (self.folder / "agent.ndjson").write_text("".join(line + "\n" for line in lines))
        (self.folder / "journal.ndjson").write_text("".join(json.dumps(e) + "\n" for e in self.journal))
        (self.folder / "ledger.json").write_text(json.dumps({"effects": self.effects, "requests": self.requests}))
        (self.folder / "context.json").write_text(json.dumps(self.context))
        if self.stdout_lines:
            (self.folder / "agent.stdout").write_text("".join(line + "\n" for line in self.stdout_lines))
        return self.folder

    def check(self) -> Verdict:
        return check(load_evidence(self.write()))


def reference_lookup_run(b: EvidenceBuilder) -> EvidenceBuilder:
    """The reference agent's story: response lost, lookup finds the ticket, closed with that evidence."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_number=1,
              attempt_budget_remaining=2)
    b.observation("op_1", "obs_1", found=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])
    return b


def reference_dedup_retry_run(b: EvidenceBuilder) -> EvidenceBuilder:
    """The documented-dedup story: response lost, retried with the same key, the destination replays."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_number=1,
              attempt_budget_remaining=2)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, attempt_number=2,
              retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch", retry_decision="retry",
              attempt_budget_remaining=1, prior_request_fingerprint=fingerprint(PAYLOAD))
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    return b


def codes(verdict: Verdict) -> set[str]:
    return {f.code for f in verdict.findings}
