"""The bundled reference agent, `python -m harness.agents.reference`: a small, generic HTTP and SSH
agent that follows the articles' rules; the wrong agents subclass it and override one step.

It reads the harness contract (intents file, destination URLs, audit log, state dir, secrets) and,
for each intent, drives one operation:

1. Persist the operation (id, idempotency key derived from it) in the state dir *before* dispatch,
   then log it. After a restart it resumes the same operation and reconciles first: what it logged
   before the crash (its own audit log) and what it had received (the state dir) say where it
   stopped, and the decision that followed the last attempt is taken again.
2. Dispatch an attempt, classify what happened (`not_sent`, `sent_no_response`,
   `response_received`), log it with its retry links.
3. After a lost response or a 5xx: look the effect up (an observation, never an attempt), waiting
   out index lag; retry only when dedup is documented and in force, or a reliable negative lookup
   says nothing happened; otherwise stay `unknown` and escalate.
4. Resolve on evidence: the attempt or observation that carried the effect reference.

An MCP tool server (contract ``transport: mcp``) is called with the ``mcp`` package's own client
(streamable HTTP, one session per attempt): an attempt is one ``tools/call`` of the intent's tool, its
arguments the intent's params plus the operation id as ``client_reference`` (and the key argument when
the contract has one), the attempt's ``traceparent`` in ``params._meta``. An error result may come after
the tool committed: like a 5xx, it is reconciled through the lookup tool. The tools' annotations
(``idempotentHint``...) are the server's hints and change nothing here: only the contract's idempotency
justifies a retry.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from harness.contract import (
    AUDIT_LOG_ENV,
    IDEMPOTENCY_HEADER,
    INTENTS_ENV,
    LOOKUP_RESULT_FIELD,
    MCP_ENDPOINT,
    MCP_TRANSPORT,
    RECEIPT_PREFIX,
    STATE_DIR_ENV,
    TRACEPARENT_ENV,
    TRACEPARENT_HEADER,
    destination_env_name,
    mcp_server_env_name,
    secret_env_name,
)
from harness.fingerprint import fingerprint
from harness.model.agent import UNCERTAIN_REASONS, derive_key, may_have_acted, retry_reason_after
from harness.model.agent import traceparent as new_traceparent
from harness.recorder import Recorder, logged_records, new_id

CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 1.5
LOOKUP_WAITS = (0.2, 0.4, 0.8)  # index lag: a negative lookup right after commit proves little
MAX_LAG_WAIT = 8.0  # waiting out a documented lag longer than this: the lookups prove nothing, dedup or escalate
# A lookup the destination did not answer (down, restarting: a 502 from a proxy, a refused connect)
# proves nothing either way: look again, waiting longer each time, for this long at most.
UNANSWERED_WAITS = (0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0)
MAX_RETRY_AFTER = 5.0
WORKER_TIMEOUT = 60.0
WORKER_FLAG = "--worker"
ASYNC_POLL_WAITS = (0.1, 0.2, 0.3, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0)


@dataclass
class Outcome:
    """What one attempt produced, as the agent could tell."""

    attempt_id: str
    dispatch_state: str
    status: int | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    exit_status: int | None = None  # SSH
    tool_error: bool = False  # MCP: the tool answered with an error result (isError)


class Agent:
    """The reference behaviour. Subclasses in `harness.agents.wrong` each break one rule."""

    max_attempts = 3
    worker_id: str | None = None  # set in a worker process that acts for the owner's operation

    def __init__(self, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ if env is None else env)
        self.env = env
        with open(env[INTENTS_ENV], encoding="utf-8") as f:
            doc = json.load(f)
        self.intents: list[dict[str, Any]] = doc["intents"]
        self.contracts: dict[str, dict[str, Any]] = doc.get("destinations", {})
        self.logged = set(logged_records(env[AUDIT_LOG_ENV]))  # before a restart: what the dead run wrote
        self.recorder = Recorder(env[AUDIT_LOG_ENV])
        self.state_path = Path(env[STATE_DIR_ENV]) / "operations.json"
        self.state: dict[str, dict[str, Any]] = (
            json.loads(self.state_path.read_text()) if self.state_path.exists() else {})
        if env.get("HTTP_PROXY") or env.get("HTTPS_PROXY"):
            from harness.proxy.host import disable_nagle_for_proxies

            disable_nagle_for_proxies()  # urllib3 leaves Nagle on behind a forward proxy (~40 ms a POST)

    # -- the contract ---------------------------------------------------------------------------

    def url(self, destination: str, path: str) -> str:
        return self.env[destination_env_name(destination)].rstrip("/") + path

    def secret(self, destination: str) -> str | None:
        return self.env.get(secret_env_name(destination))

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.state_path)  # atomic: a crash leaves the old or the new state

    # -- identities -----------------------------------------------------------------------------

    def new_operation_id(self, intent: dict[str, Any]) -> str:
        return new_id("op")

    def idempotency_key(self, op: dict[str, Any], attempt_id: str) -> str | None:
        """Derived from the operation, so every attempt of it carries the same key."""
        if op["kind"]["method"] == "EXEC":  # SSH: the operation marker is the key, if the command has one
            return op["operation_id"] if op["kind"].get("dedup") == "operation_marker" else None
        if self.is_mcp(op):  # a tool takes the key its contract names, as an argument, or none at all
            style = (self.contracts[op["intent"]["destination"]].get("idempotency") or {}).get("style", "none")
            if style == "natural_key":  # one effect per client reference: the operation id is the key
                return str(op["operation_id"])
            if style == "none":
                return None
        return derive_key(op["operation_id"])

    def is_mcp(self, op: dict[str, Any]) -> bool:
        return self.contracts[op["intent"]["destination"]].get("transport") == MCP_TRANSPORT

    # -- the driver -----------------------------------------------------------------------------

    def run(self) -> int:
        for intent in self.intents:
            self.handle(intent)
        self.recorder.close()
        return 0

    def run_worker(self, intent_id: str) -> int:
        """Act for the owner: under the owner's operation id, read from the shared state dir."""
        op = self.state[intent_id]
        if not op.get("resolved"):
            self.drive(op)
        self.recorder.close()
        return 0

    def handle(self, intent: dict[str, Any]) -> None:
        op = self.state.get(intent["intent_id"])
        if op is None:
            op = self.open_operation(intent)
        elif op.get("resolved"):
            return
        elif ("resolution", op["operation_id"]) in self.logged:  # logged, then killed before saving it
            op["resolved"] = "logged before a restart"
            self.save()
            return
        elif ("operation", op["operation_id"]) not in self.logged:  # saved, then killed before logging it
            self.log_operation(op)
        if intent.get("delegate_to_worker") and self.worker_id is None:
            self.delegate(op)
            return
        reason = self.resume(op) if op["attempts"] or op.get("pending_attempt") else None
        if reason is not None or not (op["attempts"] or op.get("resolved")):
            self.drive(op, reason)

    def resume(self, op: dict[str, Any]) -> str | None:
        """After a restart: where the dead run stopped, and the decision that followed its last attempt,
        taken again (a lost answer reconciles first). Returns the retry reason, or None when resolved."""
        pending = op.get("pending_attempt")
        if pending is not None:
            if pending.get("outcome"):  # it had received this before the crash
                outcome = Outcome(**pending["outcome"])
            else:  # the request may have left; its truth is unknown until reconciled
                outcome = Outcome(pending["attempt_id"], "sent_no_response",
                                  error="agent restarted while this attempt was in flight")
            if ("attempt", outcome.attempt_id) in self.logged:  # logged, then killed before saving it
                self.attempt_logged(op, outcome, pending["request"])
            else:
                self.log_attempt(op, outcome, pending["request"])
        else:  # killed between two attempts
            outcome = Outcome(**op["last_outcome"]) if op.get("last_outcome") else \
                Outcome(op["attempts"][-1], "sent_no_response", error="its outcome was not kept before a restart")
        return self.next_step(op, outcome)

    def delegate(self, op: dict[str, Any]) -> None:
        """Hand the operation to a worker process. The owner keeps the operation id; the worker
        acts under it and nobody else touches the operation while the worker runs."""
        self.save()
        self.recorder.close()
        # the worker is this same agent program, started in worker mode: its flaws travel with it
        main_module = getattr(sys.modules["__main__"].__spec__, "name", "harness.agents.reference")
        subprocess.run([sys.executable, "-m", main_module, WORKER_FLAG, op["intent"]["intent_id"]],
                       env=self.env, timeout=WORKER_TIMEOUT, check=False)
        self.recorder = Recorder(self.env[AUDIT_LOG_ENV], session_id=self.recorder.session_id)
        self.state = json.loads(self.state_path.read_text())
        if not self.state[op["intent"]["intent_id"]].get("resolved"):
            done = self.state[op["intent"]["intent_id"]]
            self.resolve(done, "unknown", [], list(done["attempts"]),
                         "the worker ended without resolving the operation; escalating")

    def open_operation(self, intent: dict[str, Any]) -> dict[str, Any]:
        contract = self.contracts[intent["destination"]]
        kind = contract["operations"][intent["kind"]]
        op = {"operation_id": self.new_operation_id(intent), "intent": intent, "attempts": [],
              "observations": [], "opened_at": time.time(), "kind": kind}
        op["idempotency_key"] = self.idempotency_key(op, "")
        op["payload_fingerprint"] = fingerprint(self.payload(op))
        superseded = self.state.get(intent.get("supersedes") or "", {}).get("operation_id")
        op["supersedes_operation_id"] = superseded
        op["owner"] = self.recorder.session_id
        self.state[intent["intent_id"]] = op
        self.save()  # persisted before anything is dispatched
        self.log_operation(op)
        return op

    def log_operation(self, op: dict[str, Any]) -> None:
        intent = op["intent"]
        self.recorder.operation(
            op["operation_id"], intent_id=intent["intent_id"], intent=intent,
            idempotency_key=op["idempotency_key"], payload_fingerprint=op["payload_fingerprint"],
            supersedes_operation_id=op.get("supersedes_operation_id"), owner=op.get("owner"))

    def drive(self, op: dict[str, Any], reason: str | None = None) -> None:
        while True:
            outcome = self.dispatch(op, reason)
            reason = self.next_step(op, outcome)
            if reason is None:
                return

    def next_step(self, op: dict[str, Any], outcome: Outcome) -> str | None:
        """Resolve the operation, or return the retry reason for another attempt."""
        if outcome.dispatch_state == "not_sent":
            return self.retry_if_budget(op, "connection_not_established", outcome)
        if outcome.dispatch_state == "sent_no_response":
            return self.after_unknown(op, "response_lost_after_dispatch", outcome)
        if outcome.exit_status is not None:
            if outcome.exit_status == 0:
                self.resolve(op, "succeeded", self.effect_refs(op, outcome.body), [outcome.attempt_id],
                             "the command exited 0")
            else:
                self.resolve(op, "failed", [], [outcome.attempt_id],
                             f"the command exited {outcome.exit_status}: it refused to act")
            return None
        if outcome.tool_error:
            return self.after_tool_error(op, outcome)
        status = outcome.status or 0
        if status == 202 and isinstance(outcome.body, dict) and outcome.body.get("operation"):
            self.await_async(op, outcome)
            return None
        if 200 <= status < 300:
            refs = self.effect_refs(op, outcome.body)
            if not self.verify_single_effect(op, refs):
                self.resolve(op, "succeeded", refs, [outcome.attempt_id], f"destination answered {status}")
            return None
        if status == 429:
            reason = self.retry_if_budget(op, "rate_limited", outcome)
            if reason is not None:
                time.sleep(min(_retry_after(outcome) or 1.0, MAX_RETRY_AFTER))
                # an earlier attempt may have acted and, after the wait, the key may no longer cover a retry
                if op.get("effect_uncertain") and not self.dedup_in_force(op) and self.reconcile_then_retry(op):
                    return None
            return reason
        if status == 409:
            reason = self.retry_if_budget(op, "response_lost_after_dispatch", outcome)
            if reason is not None:
                time.sleep(0.3)  # the first request is still being processed under this key
            return reason
        reason = retry_reason_after(outcome.dispatch_state, status)
        if reason is not None and may_have_acted(outcome.dispatch_state, status):  # a 5xx, 408, 425: it may have
            return self.after_unknown(op, reason, outcome)  # acted (or may still act): reconcile first
        if op.get("effect_uncertain"):
            self.after_rejected_retry(op, outcome)
            return None
        self.resolve(op, "failed", [], [outcome.attempt_id], f"destination rejected the request: {status}")
        return None

    def after_tool_error(self, op: dict[str, Any], outcome: Outcome) -> str | None:
        """An MCP error result: the tool says the call failed, not that it did nothing before failing. Look
        it up as after a 5xx; a lookup that waited out the lag and found nothing makes the failure known."""
        op["effect_uncertain"] = True
        lookup = self.contracts[op["intent"]["destination"]].get("lookup")
        if lookup:
            found, negatives = self.look_up_until_answered(op, lookup)
            if len(set(found)) > 1:
                self.duplicate_confirmed(op, sorted(set(found)))
            elif found:
                self.resolve(op, "succeeded", found, [op["observations"][-1]],
                             "the tool answered an error, but the lookup tool found the effect")
            elif negatives:
                self.resolve(op, "failed", [], [outcome.attempt_id, op["observations"][-1]],
                             f"the tool answered an error ({outcome.error}) and lookups after the lag found nothing")
            else:
                self.resolve(op, "unknown", [], [*op["attempts"], *op["observations"]],
                             "the tool answered an error and every lookup failed; escalating")
            return None
        if self.dedup_in_force(op):  # the key argument makes a retry return the first call's result
            return self.retry_if_budget(op, "destination_5xx", outcome)
        self.resolve(op, "unknown", [], list(op["attempts"]),
                     "the tool answered an error, it may have committed first, and nothing can tell; escalating")
        return None

    def after_rejected_retry(self, op: dict[str, Any], outcome: Outcome) -> None:
        """A retry was rejected (4xx) after an earlier attempt may have acted: the rejection says nothing of
        that one. Look it up; failed only on lookups that waited out the lag, else unknown."""
        lookup = self.contracts[op["intent"]["destination"]].get("lookup")
        found, negatives = self.look_up_until_answered(op, lookup) if lookup else ([], 0)
        if len(set(found)) > 1:
            self.duplicate_confirmed(op, sorted(set(found)))
        elif found:
            self.resolve(op, "succeeded", found, [op["observations"][-1]],
                         "lookup by client reference found the effect of an earlier attempt")
        elif negatives:
            self.resolve(op, "failed", [], [outcome.attempt_id, op["observations"][-1]],
                         f"the retry was rejected ({outcome.status}) and lookups after the lag found nothing")
        else:
            self.resolve(op, "unknown", [], [*op["attempts"], *op["observations"]],
                         f"the retry was rejected ({outcome.status}) but an earlier attempt may have acted; escalating")

    def verify_single_effect(self, op: dict[str, Any], refs: list[str]) -> bool:
        """Without dedup, a success does not prove a single effect (a network may have delivered the
        request twice): read back by client reference. True when that resolved the operation."""
        contract = self.contracts[op["intent"]["destination"]]
        if (contract.get("idempotency") or {}).get("style", "none") != "none" or not contract.get("lookup"):
            return False
        found: list[str] = []
        for wait in self.lookup_waits(contract["lookup"]):
            time.sleep(wait)
            found, _ = self.lookup(op, source="read_after_write")
            if set(found) - set(refs) or (found and not self.within_lag(op, contract["lookup"])):
                break
        if len(set(found) | set(refs)) > 1:
            self.duplicate_confirmed(op, sorted(set(found) | set(refs)))
            return True
        return False

    def duplicate_confirmed(self, op: dict[str, Any], refs: list[str]) -> None:
        """Two records for one intent: close as duplicate_effect_confirmed, and open the correction
        as a new operation that waits for an operator (compensation is never automatic)."""
        correction_id = new_id("op")
        self.recorder.operation(
            correction_id, intent={"kind": "compensate_duplicate", "destination": op["intent"]["destination"],
                                   "params": {"effect_refs": refs[1:]}},
            correction_of_operation_id=op["operation_id"], owner="operator")
        self.resolve(op, "duplicate_effect_confirmed", refs, [op["observations"][-1]],
                     f"reconciliation found {len(refs)} records for one intent: {', '.join(refs)}",
                     correction_operation_id=correction_id)

    def after_unknown(self, op: dict[str, Any], reason: str, outcome: Outcome) -> str | None:
        """The effect may exist. Reconcile first; retry only when that is provably safe."""
        if self.reconcile_then_retry(op):
            return None
        return self.retry_if_budget(op, reason, outcome)

    def reconcile_then_retry(self, op: dict[str, Any]) -> bool:
        """Look the effect up. True when the operation got resolved (found, or must stay unknown)."""
        contract = self.contracts[op["intent"]["destination"]]
        found: list[str] = []
        negatives = 0
        if contract.get("lookup"):
            # with dedup in force the retry is safe whatever the lookup says: one look, no waiting out the lag
            found, negatives = self.look_up_until_answered(op, contract["lookup"], patient=not self.dedup_in_force(op))
        if len(set(found)) > 1:
            self.duplicate_confirmed(op, sorted(set(found)))
            return True
        if found:
            self.resolve(op, "succeeded", found, [op["observations"][-1]],
                         "lookup by client reference found the effect")
            return True
        if self.dedup_in_force(op) or negatives:
            return False  # documented dedup, or a negative lookup after waiting out the lag
        why = ("every lookup failed" if contract.get("lookup") else "no lookup") + \
            " and no deduplication in force"
        self.resolve(op, "unknown", [], [*op["attempts"], *op["observations"]],
                     f"{why}: the effect may exist; escalating to an operator instead of retrying")
        return True

    def look_up_until_answered(self, op: dict[str, Any], lookup: dict[str, Any],
                               patient: bool = True) -> tuple[list[str], int]:
        """Look the effect up until it is found or the index lag has passed (``lookup_waits``); a
        lookup the destination did not answer counts for nothing and is tried again after a longer
        wait (``UNANSWERED_WAITS``, a bounded few seconds). Returns what was found and how many
        answered lookups found nothing."""
        lag_waits = self.lookup_waits(lookup) if patient else [0.0]  # impatient: no waiting out the lag,
        unanswered_waits = list(UNANSWERED_WAITS)  # but a destination that does not answer is waited for
        found: list[str] = []
        negatives = 0
        wait = lag_waits.pop(0)
        while True:
            time.sleep(wait)
            found, answered = self.lookup(op)
            if found:
                return found, negatives
            if answered and not self.within_lag(op, lookup):  # within the lag, empty proves nothing
                negatives += 1
            if answered:
                if not lag_waits:
                    return found, negatives
                wait = lag_waits.pop(0)
            elif unanswered_waits:
                wait = unanswered_waits.pop(0)
            else:
                return found, negatives

    def lookup_waits(self, lookup: dict[str, Any]) -> list[float]:
        """Look now, then again until the index lag (with a margin) has passed. A destination that
        documents its lag is taken at its word; one that does not gets a few spaced looks."""
        if "lag_seconds" not in lookup:
            return [0.0, *LOOKUP_WAITS]
        waits = [0.0]
        lag = float(lookup["lag_seconds"] or 0.0)
        while sum(waits) < min(lag * 1.5, MAX_LAG_WAIT):
            waits.append(max(0.2, lag / 2))
        return waits

    def within_lag(self, op: dict[str, Any], lookup: dict[str, Any]) -> bool:
        """True while a negative lookup may only mean the index has not caught up yet."""
        since = time.time() - op.get("last_dispatch_at", 0.0)
        return since < float(lookup.get("lag_seconds") or 0.0) * 1.5

    def dedup_in_force(self, op: dict[str, Any]) -> bool:
        if op["kind"].get("dedup") == "operation_marker":
            return True  # the command creates its marker exclusively before acting
        idem = self.contracts[op["intent"]["destination"]].get("idempotency") or {}
        if idem.get("style", "none") == "none" or not op.get("idempotency_key"):
            return False
        retention = idem.get("retention_seconds")
        return retention is None or time.time() - op["opened_at"] < float(retention) * 0.9

    def retry_if_budget(self, op: dict[str, Any], reason: str, outcome: Outcome) -> str | None:
        if reason in UNCERTAIN_REASONS:  # some attempt may have acted: only evidence can say it did not
            op["effect_uncertain"] = True
        if len(op["attempts"]) >= self.max_attempts:
            # not the last attempt's fate alone: a refused connection after a lost response proves nothing
            state = "unknown" if op.get("effect_uncertain") else "failed"
            self.resolve(op, state, [], list(op["attempts"]),
                         f"attempt budget of {self.max_attempts} spent after {reason}")
            return None
        return reason

    # -- wire -----------------------------------------------------------------------------------

    def payload(self, op: dict[str, Any]) -> Any:
        if op["kind"]["method"] == "EXEC":
            return shlex.split(self.command(op))
        body = {**op["kind"].get("body_defaults", {}), **op["intent"].get("params", {})}
        field_name = op["kind"].get("client_reference_field")
        if field_name:
            body[field_name] = self.client_reference(op)
        return body

    @staticmethod
    def client_reference(op: dict[str, Any]) -> str:
        """The reference the write is tagged with and looked up by: the intent's own when its params give one (a
        team's external_id), else the operation id."""
        field_name = op["kind"].get("client_reference_field")
        given = op["intent"].get("params", {}).get(field_name) if field_name else None
        return str(given) if isinstance(given, (str, int)) and not isinstance(given, bool) else op["operation_id"]

    def command(self, op: dict[str, Any]) -> str:
        params = {k: shlex.quote(str(v)) for k, v in op["intent"].get("params", {}).items()}
        return op["kind"]["command"].format(**{"operation_id": op["operation_id"], **params})

    def build_request(self, op: dict[str, Any], attempt_id: str) -> dict[str, Any]:
        destination = op["intent"]["destination"]
        traceparent = self.traceparent(op)
        if op["kind"]["method"] == "EXEC":
            return {"method": "EXEC", "path": self.command(op), "body": self.payload(op),
                    "headers": {TRACEPARENT_ENV: traceparent}, "traceparent": traceparent,
                    "key": self.idempotency_key(op, attempt_id)}
        idem = self.contracts[destination].get("idempotency") or {}
        key = self.idempotency_key(op, attempt_id)
        body = self.payload(op)
        if self.is_mcp(op):  # one tools/call: the arguments are the body, the key one of them
            if key and idem.get("body_field"):
                body[idem["body_field"]] = key
            return {"method": op["kind"]["method"], "path": op["kind"]["path"], "body": body, "headers": {},
                    "traceparent": traceparent, "key": key}
        headers = {TRACEPARENT_HEADER: traceparent, **self.auth(destination)}
        if key and idem.get("body_field"):
            body[idem["body_field"]] = key
        elif key:
            headers[idem.get("header") or IDEMPOTENCY_HEADER] = key
        path = op["kind"]["path"].format(**op["intent"].get("params", {}))
        return {"method": op["kind"]["method"], "path": path, "body": body,
                "headers": headers, "traceparent": traceparent, "key": key}

    def traceparent(self, op: dict[str, Any]) -> str:
        return new_traceparent(op["operation_id"])

    def dispatch(self, op: dict[str, Any], reason: str | None) -> Outcome:
        attempt_id = new_id("att")
        request = self.build_request(op, attempt_id)
        request["retry_reason"] = reason
        op["pending_attempt"] = {"attempt_id": attempt_id, "request": request}
        op["last_dispatch_at"] = time.time()
        self.save()  # a crash from here on leaves a record to reconcile on restart
        outcome = self.send(attempt_id, request, op)
        op["pending_attempt"]["outcome"] = asdict(outcome)
        self.save()  # what came back is kept before it is logged and acted on: a restart takes it up
        self.log_attempt(op, outcome, request)
        return outcome

    def send(self, attempt_id: str, request: dict[str, Any], op: dict[str, Any]) -> Outcome:
        if request["method"] == "EXEC":
            return asyncio.run(self.send_ssh(attempt_id, request, op))
        if self.is_mcp(op):
            state, result, error = asyncio.run(self.call_tool(
                op["intent"]["destination"], request["path"], request["body"], request["traceparent"]))
            if result is None:
                return Outcome(attempt_id, state, error=error)
            return Outcome(attempt_id, state, 200, None if result.is_error else result.resource,
                           error=result.text[:200] if result.is_error else None, tool_error=result.is_error)
        url = self.url(op["intent"]["destination"], request["path"])
        try:
            # a fresh connection per attempt: a stale pooled socket would blur not_sent and sent
            response = requests.request(request["method"], url, json=request["body"],
                                        headers={**request["headers"], "Connection": "close"},
                                        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        except requests.ConnectTimeout as exc:
            return Outcome(attempt_id, "not_sent", error=type(exc).__name__)
        except requests.ConnectionError as exc:
            if _connection_refused(exc):
                return Outcome(attempt_id, "not_sent", error="connection refused")
            return Outcome(attempt_id, "sent_no_response", error=_short_error(exc))
        except requests.Timeout as exc:
            return Outcome(attempt_id, "sent_no_response", error=f"read timeout: {type(exc).__name__}")
        except requests.RequestException as exc:  # the answer broke off (a cut body, a bad chunk): none usable
            return Outcome(attempt_id, "sent_no_response", error=f"the answer broke off: {_short_error(exc)}")
        try:
            body = response.json()
        except ValueError:
            body = None
        return Outcome(attempt_id, "response_received", response.status_code, body,
                       {k.lower(): v for k, v in response.headers.items()})

    async def call_tool(self, destination: str, tool: str, arguments: dict[str, Any],
                        traceparent: str | None) -> tuple[str, Any, str | None]:
        """One ``tools/call`` through a fresh MCP session (the mcp package's streamable HTTP client):
        (dispatch state, the CallToolResult or None, error). Before the call is written nothing of it
        left (``not_sent``); once it is, a broken or late answer leaves its fate unknown."""
        from harness.agents.mcp_client import call_tool

        contract = self.contracts[destination]
        server = self.env.get(mcp_server_env_name(destination))  # served over stdio: the command that starts it
        state, result, cause = await call_tool(
            self.url(destination, contract.get("endpoint") or MCP_ENDPOINT), tool, arguments, traceparent=traceparent,
            headers=self.auth(destination), connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
            server=shlex.split(server) if server else None)
        return state, result, None if cause is None else (_short_error(cause) or type(cause).__name__)

    async def send_ssh(self, attempt_id: str, request: dict[str, Any], op: dict[str, Any]) -> Outcome:
        import asyncssh  # only agents that talk SSH pay for the import

        url = urlsplit(self.env[destination_env_name(op["intent"]["destination"])])
        try:
            connection = await asyncssh.connect(
                url.hostname, url.port, username="agent", known_hosts=None, client_keys=None,
                agent_path=None, connect_timeout=CONNECT_TIMEOUT)
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            return Outcome(attempt_id, "not_sent", error=f"ssh connect failed: {type(exc).__name__}")
        try:
            async with connection:
                result = await asyncio.wait_for(
                    connection.run(request["path"], env={TRACEPARENT_ENV: request["headers"][TRACEPARENT_ENV]}),
                    READ_TIMEOUT)
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            return Outcome(attempt_id, "sent_no_response", error=f"ssh session lost: {type(exc).__name__}")
        if result.exit_status is None:  # the channel closed before the command's exit status
            return Outcome(attempt_id, "sent_no_response", error="connection lost before the exit status")
        return Outcome(attempt_id, "response_received", exit_status=result.exit_status, body=result.stdout,
                       error=(result.stderr or None) and str(result.stderr).strip()[:200])

    def log_attempt(self, op: dict[str, Any], outcome: Outcome, request: dict[str, Any]) -> None:
        """Log the attempt, then save that it is logged (a crash in between: the log says so on restart)."""
        previous = op["attempts"][-1] if op["attempts"] else None
        fp = fingerprint(request["body"])
        retry = {}
        if previous is not None:
            retry = {"retry_of_attempt_id": previous, "retry_reason": request.get("retry_reason"),
                     "retry_decision": self.retry_decision(op, request.get("retry_reason")),
                     "prior_request_fingerprint": op.get("last_fingerprint")}
        number = len(op["attempts"]) + 1
        self.recorder.attempt(
            op["operation_id"], outcome.attempt_id, outcome.dispatch_state,
            attempt_number=number, destination=op["intent"]["destination"],
            method=request["method"], path=request["path"], idempotency_key=request["key"],
            request_fingerprint=fp, http_status=outcome.status, exit_status=outcome.exit_status,
            error=outcome.error,
            traceparent=request.get("traceparent"),
            attempt_budget_remaining=self.max_attempts - number,
            effect_refs=self.effect_refs(op, outcome.body) or None,
            retry_after_seconds=_retry_after(outcome), worker=self.worker_id,
            tool_error=True if outcome.tool_error else None,
            retry_justification=self.retry_justification(op, request.get("retry_reason")) if retry else None,
            **retry)
        self.attempt_logged(op, outcome, request)

    def attempt_logged(self, op: dict[str, Any], outcome: Outcome, request: dict[str, Any]) -> None:
        op["attempts"].append(outcome.attempt_id)
        op["last_fingerprint"] = fingerprint(request["body"])
        op["last_outcome"] = asdict(outcome)
        op.pop("pending_attempt", None)
        self.save()

    def retry_justification(self, op: dict[str, Any], reason: str | None) -> str | None:
        """What a retry rests on, beyond its reason (a wrong agent names the hint it trusted); None: the
        reason and the decision say it all."""
        return None

    def retry_decision(self, op: dict[str, Any], reason: str | None) -> str:
        if reason in ("response_lost_after_dispatch", "destination_5xx"):
            if op["observations"]:
                return "retry: reconciliation lookup found no effect after waiting out index lag"
            return "retry: destination deduplicates this idempotency key and it is within retention"
        return f"retry: {reason} means the destination did not act"

    def lookup(self, op: dict[str, Any], source: str = "lookup") -> tuple[list[str], bool]:
        """Look the effect up by client reference (an observation). Returns the refs found and
        whether the destination answered at all: a failed lookup proves nothing either way."""
        contract = self.contracts[op["intent"]["destination"]]
        spec = contract["lookup"]
        obs_id = new_id("obs")
        refs: list[str] = []
        found: bool | None = None
        detail = None
        if self.is_mcp(op):  # the lookup tool: {result_field: [resources]} for the client reference
            state, result, error = asyncio.run(self.call_tool(
                op["intent"]["destination"], spec["path"], {spec["query_param"]: self.client_reference(op)},
                self.traceparent(op)))
            body = result.resource if result is not None and not result.is_error else None
            detail = (f"lookup failed: {error or state}" if result is None else
                      "tool error: " + result.text[:150] if result.is_error else "tool result")
            if isinstance(body, dict) and isinstance(body.get(spec.get("result_field", LOOKUP_RESULT_FIELD)), list):
                refs = [ref for item in body[spec.get("result_field", LOOKUP_RESULT_FIELD)]
                        if (ref := _ref_in(item, self.lookup_ref_field(op))) is not None]
                found = bool(refs)
            return self.observed(op, obs_id, source, spec, found, refs, detail)
        try:
            response = requests.request(
                spec.get("method", "GET"), self.url(op["intent"]["destination"], spec["path"]),
                params={spec["query_param"]: self.client_reference(op)},
                headers={"Connection": "close", **self.auth(op["intent"]["destination"])},
                timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
            detail = f"HTTP {response.status_code}"
            if response.ok:
                items = _ref_in(response.json(), spec.get("result_field", LOOKUP_RESULT_FIELD), whole=True) or []
                refs = [ref for item in items if (ref := _ref_in(item, self.lookup_ref_field(op))) is not None]
                found = bool(refs)
        except (requests.RequestException, ValueError, KeyError, AttributeError) as exc:
            detail = f"lookup failed: {type(exc).__name__}"
        return self.observed(op, obs_id, source, spec, found, refs, detail)

    def observed(self, op: dict[str, Any], obs_id: str, source: str, spec: dict[str, Any], found: bool | None,
                 refs: list[str], detail: str | None) -> tuple[list[str], bool]:
        """Log a lookup's observation; (refs found, whether the destination answered)."""
        self.recorder.observation(op["operation_id"], obs_id, source=source,
                                  method=spec.get("method", "GET"), path=spec["path"], found=found,
                                  effect_refs=refs, detail=detail,
                                  lag_possible=self.within_lag(op, spec) if found is False else None)
        op["observations"].append(obs_id)  # after the log: a resolution cites only what is logged
        self.save()
        return refs, found is not None

    def await_async(self, op: dict[str, Any], outcome: Outcome) -> None:
        """202 Accepted: the operation is accepted, not done. Poll its status (observations)."""
        destination = op["intent"]["destination"]
        ref = outcome.body["operation"]
        path = ref.get("status_url") or self.contracts[destination]["status"]["path"].format(id=ref["id"])
        for wait in ASYNC_POLL_WAITS:
            time.sleep(wait)
            obs_id = new_id("obs")
            try:
                response = requests.get(self.url(destination, path), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                                        headers={"Connection": "close", **self.auth(destination)})
                body = response.json() if response.ok else {}
            except (requests.RequestException, ValueError):
                body = {}
            status = body.get("status") if isinstance(body, dict) else None
            refs = [str(body["effect_ref"])] if status == "succeeded" and body.get("effect_ref") else []
            # a poll the destination did not answer (down, restarting: a 502) says nothing: found null
            self.recorder.observation(op["operation_id"], obs_id, source="status_poll", method="GET",
                                      path=path, found=bool(refs) if status else None, effect_refs=refs,
                                      detail=f"operation {ref['id']} is {status or 'unreadable'}")
            op["observations"].append(obs_id)
            self.save()
            if status == "succeeded":
                self.resolve(op, "succeeded", refs, [outcome.attempt_id, obs_id],
                             f"asynchronous operation {ref['id']} reported succeeded")
                return
            if status == "failed":
                self.resolve(op, "failed", [], [outcome.attempt_id, obs_id],
                             f"asynchronous operation {ref['id']} reported failed")
                return
        self.resolve(op, "unknown", [], [outcome.attempt_id, *op["observations"]],
                     f"asynchronous operation {ref['id']} still pending; escalating")

    def auth(self, destination: str) -> dict[str, str]:
        token = self.secret(destination)
        return {"Authorization": f"Bearer {token}"} if token else {}

    def effect_refs(self, op: dict[str, Any], body: Any) -> list[str]:
        if isinstance(body, str):  # SSH output carries its receipt on a RECEIPT_PREFIX line
            return [line[len(RECEIPT_PREFIX):].strip() for line in body.splitlines()
                    if line.startswith(RECEIPT_PREFIX)]
        ref = _ref_in(body, op["kind"].get("effect_ref_field", "id"))
        return [ref] if ref is not None else []

    def lookup_ref_field(self, op: dict[str, Any]) -> str:
        """Where a lookup's item names its effect: the lookup's own field (a listed resource), else the write's."""
        spec = self.contracts[op["intent"]["destination"]].get("lookup") or {}
        return spec.get("effect_ref_field") or op["kind"].get("effect_ref_field", "id")

    def resolve(self, op: dict[str, Any], state: str, refs: list[str], evidence: list[str],
                reason: str, **fields: Any) -> None:
        self.recorder.resolution(op["operation_id"], state, effect_refs=refs, evidence=evidence,
                                 reason=reason, **fields)
        op["resolved"] = state  # after the log (a crash in between: the log says so on restart)
        self.save()


def _ref_in(body: Any, dotted: str, *, whole: bool = False) -> Any:
    """The value at a dotted path of an answer (``ticket.id``: a nested answer), as text (``whole``: as it is);
    None when the path is not there."""
    for part in dotted.split("."):
        if not isinstance(body, dict) or body.get(part) is None:
            return None
        body = body[part]
    return body if whole else str(body)


def _first_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what the transport raised)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _retry_after(outcome: Outcome) -> float | None:
    value = outcome.headers.get("retry-after") if outcome.status == 429 else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _connection_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError) or "NewConnectionError" in type(cur).__name__:
            return True
        cur = cur.__cause__ or cur.__context__ or (cur.args[0] if cur.args and isinstance(
            cur.args[0], BaseException) else None) or getattr(cur, "reason", None)
    return False


def _short_error(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 200 else text[:197] + "..."


def main(agent_class: type[Agent] = Agent) -> None:
    """`python -m <agent>` runs the intents; `python -m <agent> --worker INTENT_ID` runs one
    delegated intent as a worker of the owner that started it."""
    if sys.argv[1:2] == [WORKER_FLAG] and len(sys.argv) == 3:
        agent = agent_class()
        agent.worker_id = new_id("wrk")
        sys.exit(agent.run_worker(sys.argv[2]))
    sys.exit(agent_class().run())


if __name__ == "__main__":
    main(Agent)
