"""Held-out correct agent, style "state machine": written from docs/contract.md alone, not from the rules.
kind: correct
transport: http, mcp, ssh

Every step of an operation is a state persisted in HARNESS_STATE_DIR before the next is taken (opened,
pending attempt, attempt done, resolved), so a kill at any point resumes where it was. HTTP, MCP and SSH.
The held-out wrong agents subclass `Agent` and override one method each: one flaw, the rest correct.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import requests


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def fingerprint(value: Any) -> str:  # contract section 5: sha256 of the canonical JSON
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def env_suffix(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


class Outcome(NamedTuple):
    state: str  # dispatch_state
    status: int | None = None
    body: Any = None
    headers: dict[str, str] | None = None
    error: str | None = None
    tool_error: bool = False


class Agent:
    MAX_ATTEMPTS = 3
    TIMEOUT = (1.0, 1.5)  # connect, read: under the 2.2 s holds of the catalogue (contract section 11)
    STATE_NAME = "heldout-state.json"

    def __init__(self) -> None:
        env = os.environ
        self.env = env
        self.doc = json.loads(Path(env["HARNESS_INTENTS"]).read_text(encoding="utf-8"))
        self.log = open(env["HARNESS_AUDIT_LOG"], "a", encoding="utf-8")
        self.state_file = Path(env["HARNESS_STATE_DIR"]) / self.STATE_NAME
        self.state: dict[str, Any] = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        self.session = new_id("ses")

    # ---- evidence -------------------------------------------------------------------------------
    def emit(self, event: str, op_id: str, **fields: Any) -> None:
        record = {"event": event, "ts": time.time(), "session_id": self.session, "operation_id": op_id}
        record.update({k: v for k, v in fields.items() if v is not None})
        self.log.write(json.dumps(record) + "\n")
        self.log.flush()

    def save(self) -> None:  # atomic: a kill leaves the old state or the new one
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.state_file)

    # ---- the destination's contract ---------------------------------------------------------------
    def contract(self, op: dict) -> dict:
        return self.doc["destinations"][op["intent"]["destination"]]

    def kind(self, op: dict) -> dict:
        return self.contract(op)["operations"][op["intent"]["kind"]]

    def transport(self, op: dict) -> str:
        if self.kind(op)["method"] == "EXEC":
            return "ssh"
        return "mcp" if self.contract(op).get("transport") == "mcp" else "http"

    def base_url(self, op: dict) -> str:
        return self.env["HARNESS_DESTINATION_" + env_suffix(op["intent"]["destination"])].rstrip("/")

    # ---- identities -----------------------------------------------------------------------------
    def new_operation_id(self, intent: dict) -> str:
        return new_id("op")

    def derive_key(self, op: dict) -> str | None:
        idem = self.contract(op)["idempotency"]
        if self.transport(op) == "ssh":
            return op["operation_id"] if self.kind(op).get("dedup") == "operation_marker" else None
        if idem["style"] == "natural_key":
            return op["operation_id"]  # the client reference is the key
        if idem["style"] == "none":
            return None
        return "idem_" + hashlib.sha256(op["operation_id"].encode()).hexdigest()[:24]

    def build_request(self, op: dict) -> None:
        """Fills op's path, body and headers (contract section 4) once: every retry sends the same."""
        kind, idem, intent = self.kind(op), self.contract(op)["idempotency"], op["intent"]
        op["headers"] = {}
        if self.transport(op) == "ssh":
            params = {k: shlex.quote(str(v)) for k, v in intent["params"].items()}
            op["path"] = kind["command"].format(**{"operation_id": op["operation_id"], **params})
            op["body"] = shlex.split(op["path"])
            return
        if self.transport(op) == "mcp":
            op["path"] = kind["path"]
            body = {**intent["params"], kind["client_reference_field"]: op["operation_id"]}
        else:
            op["path"] = kind["path"].format(**intent["params"])
            body = {**(kind.get("body_defaults") or {}), **intent["params"],
                    kind["client_reference_field"]: op["operation_id"]}
        if op["key"] and idem["style"] == "natural_key":
            pass  # the client reference already carries it
        elif op["key"] and idem.get("body_field"):
            body[idem["body_field"]] = op["key"]
        elif op["key"]:
            op["headers"][idem["header"]] = op["key"]
        op["body"] = body

    def open_operation(self, intent: dict) -> dict:
        op: dict[str, Any] = {"operation_id": self.new_operation_id(intent), "intent": intent, "attempts": [],
                              "opened_at": time.time(), "last_sent": 0.0, "resolved": False, "pending": None}
        op["key"] = self.derive_key(op)
        self.build_request(op)
        self.state[intent["intent_id"]] = op
        self.save()  # persisted before it is declared, declared before anything is sent
        superseded = self.state.get(intent.get("supersedes") or "", {}).get("operation_id")
        self.declare(op, superseded)
        return op

    def declare(self, op: dict, superseded: str | None) -> None:
        self.emit("operation", op["operation_id"], intent_id=op["intent"]["intent_id"], intent=op["intent"],
                  idempotency_key=op["key"], payload_fingerprint=fingerprint(op["body"]), state="open",
                  owner=self.session if not op.get("owner") else op["owner"], supersedes_operation_id=superseded)

    # ---- sending --------------------------------------------------------------------------------
    def headers_for(self, op: dict) -> dict[str, str]:
        headers = {"Connection": "close"}
        secret = self.env.get("HARNESS_SECRET_" + env_suffix(op["intent"]["destination"]))
        if secret:
            headers["Authorization"] = "Bearer " + secret  # sent, never logged
        return headers

    def http(self, op: dict, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {**self.headers_for(op), **kwargs.pop("headers", {})}
        url = path if path.startswith("http") else self.base_url(op) + path
        return requests.request(method, url, headers=headers, timeout=self.TIMEOUT, **kwargs)

    def send(self, op: dict, attempt: dict) -> Outcome:
        transport = self.transport(op)
        if transport == "ssh":
            return asyncio.run(self.send_ssh(op, attempt))
        if transport == "mcp":
            return self.send_mcp(op, attempt)
        return self.send_http(op, attempt)

    def send_http(self, op: dict, attempt: dict) -> Outcome:
        try:
            answer = self.http(op, self.kind(op)["method"], op["path"], json=op["body"],
                               headers={**op["headers"], "traceparent": attempt["traceparent"]})
        except requests.ConnectTimeout:
            return Outcome("not_sent", error="connect timeout")
        except requests.ConnectionError as exc:
            refused = "NewConnectionError" in repr(exc) or "refused" in str(exc).lower()
            return Outcome("not_sent" if refused else "sent_no_response", error=str(exc)[:200])
        except requests.RequestException as exc:  # read timeout, a body cut short: it may have acted
            return Outcome("sent_no_response", error=type(exc).__name__)
        try:
            body = answer.json()
        except ValueError:
            if answer.ok:  # a 2xx naming no effect is as good as no answer
                return Outcome("sent_no_response", error="answer body unreadable")
            body = {}
        return Outcome("response_received", answer.status_code, body, dict(answer.headers))

    def mcp_url(self, op: dict) -> str:
        return self.base_url(op) + (self.contract(op).get("endpoint") or "/mcp")

    def call_tool(self, op: dict, name: str, arguments: dict, meta: dict | None) -> Outcome:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client

        written = False

        async def go() -> Any:
            nonlocal written
            async with streamablehttp_client(self.mcp_url(op)) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    written = True  # from here the tools/call may have left
                    return await session.call_tool(name, arguments, read_timeout_seconds=timedelta(seconds=1.5),
                                                   meta=meta)

        try:
            result = asyncio.run(go())
        except BaseException as exc:  # noqa: BLE001 - an ExceptionGroup out of the transport, a timeout
            if isinstance(exc, KeyboardInterrupt):
                raise
            return Outcome("sent_no_response" if written else "not_sent", error=type(exc).__name__)
        resource = result.structuredContent
        if resource is None:
            text = next((c.text for c in result.content if getattr(c, "type", "") == "text"), "")
            try:
                resource = json.loads(text)
            except ValueError:
                resource = {"text": text}
        return Outcome("response_received", 200, resource, None, None, bool(result.isError))

    def send_mcp(self, op: dict, attempt: dict) -> Outcome:
        return self.call_tool(op, op["path"], op["body"], {"traceparent": attempt["traceparent"]})

    async def send_ssh(self, op: dict, attempt: dict) -> Outcome:
        import asyncssh

        url = urlsplit(self.base_url(op))
        try:
            conn = await asyncssh.connect(url.hostname, url.port, username="agent", known_hosts=None,
                                          client_keys=None, agent_path=None, connect_timeout=self.TIMEOUT[0])
        except (OSError, asyncssh.Error) as exc:
            return Outcome("not_sent", error=f"ssh connect failed: {type(exc).__name__}")
        try:
            async with conn:
                result = await asyncio.wait_for(conn.run(op["path"], env={"TRACEPARENT": attempt["traceparent"]}), 10)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            return Outcome("sent_no_response", error=f"ssh session lost: {type(exc).__name__}")
        if result.exit_status is None:  # dropped before the exit status
            return Outcome("sent_no_response", error="connection lost before the exit status")
        return Outcome("response_received", None, {"exit_status": result.exit_status, "stdout": str(result.stdout)})

    def effect_refs(self, op: dict, outcome: Outcome) -> list[str]:
        if outcome.state != "response_received":
            return []
        if self.transport(op) == "ssh":
            return [line.split(":", 1)[1].strip() for line in outcome.body.get("stdout", "").splitlines()
                    if line.startswith("effect_ref:")]
        if outcome.tool_error or not outcome.status or outcome.status >= 300 or outcome.status == 202:
            return []
        ref = outcome.body.get(self.kind(op)["effect_ref_field"]) if isinstance(outcome.body, dict) else None
        return [str(ref)] if ref else []

    # ---- attempts -------------------------------------------------------------------------------
    def new_attempt(self, op: dict, reason: str | None, decision: str | None) -> dict:
        trace = uuid.uuid4().hex
        return {"attempt_id": new_id("att"), "sent_at": time.time(), "reason": reason, "decision": decision,
                "traceparent": f"00-{trace}-{uuid.uuid4().hex[:16]}-01", "key": op["key"]}

    def log_attempt(self, op: dict, attempt: dict, outcome: Outcome, refs: list[str]) -> None:
        previous = op["attempts"][-1] if op["attempts"] else None
        op["attempts"].append(attempt["attempt_id"])
        retry = {}
        if previous:
            retry = {"retry_of_attempt_id": previous, "retry_reason": attempt["reason"],
                     "retry_decision": attempt["decision"], "prior_request_fingerprint": fingerprint(op["body"])}
        retry_after = self.retry_after(outcome)
        self.emit("attempt", op["operation_id"], ts=attempt["sent_at"], attempt_id=attempt["attempt_id"],
                  attempt_number=len(op["attempts"]), destination=op["intent"]["destination"],
                  method=self.kind(op)["method"], path=op["path"], idempotency_key=attempt["key"],
                  request_fingerprint=fingerprint(op["body"]), dispatch_state=outcome.state,
                  http_status=outcome.status, effect_refs=refs or None, error=outcome.error,
                  tool_error=outcome.tool_error or None, traceparent=attempt["traceparent"],
                  retry_after_seconds=retry_after if outcome.status == 429 else None,
                  exit_status=(outcome.body or {}).get("exit_status") if self.transport(op) == "ssh" else None,
                  attempt_budget_remaining=self.MAX_ATTEMPTS - len(op["attempts"]), **retry)
        self.save()

    def dispatch(self, op: dict, reason: str | None, decision: str | None) -> tuple[str, Outcome, list[str]]:
        attempt = self.new_attempt(op, reason, decision)
        op["pending"] = attempt
        op["last_sent"] = attempt["sent_at"]
        self.save()  # a kill from here on leaves a pending attempt to log and reconcile on restart
        outcome = self.send(op, attempt)
        refs = self.effect_refs(op, outcome)
        op["pending"] = None
        self.log_attempt(op, attempt, outcome, refs)
        return attempt["attempt_id"], outcome, refs

    def retry_after(self, outcome: Outcome) -> float:
        value = (outcome.headers or {}).get("Retry-After") or (outcome.headers or {}).get("retry-after")
        try:
            return float(value) if value is not None else 1.0
        except ValueError:
            return 1.0

    # ---- observations ---------------------------------------------------------------------------
    def lookup_once(self, op: dict, source: str = "lookup") -> tuple[bool | None, list[str], str]:
        spec, field = self.contract(op)["lookup"], self.kind(op)["effect_ref_field"]
        obs_id, found, refs = new_id("obs"), None, []
        try:
            if self.transport(op) == "mcp":
                outcome = self.call_tool(op, spec["path"], {spec["query_param"]: op["operation_id"]}, None)
                if outcome.state == "response_received" and not outcome.tool_error:
                    refs = [str(item[field]) for item in outcome.body[spec["result_field"]]]
                    found = bool(refs)
            else:
                answer = self.http(op, spec["method"], spec["path"], params={spec["query_param"]: op["operation_id"]})
                if answer.ok:
                    refs = [str(item[field]) for item in answer.json()[spec["result_field"]]]
                    found = bool(refs)
        except (requests.RequestException, ValueError, KeyError, TypeError):
            found, refs = None, []  # unanswered: no evidence either way
        within_lag = time.time() - op["last_sent"] < 1.5 * (spec.get("lag_seconds") or 0.0)
        self.emit("observation", op["operation_id"], observation_id=obs_id, source=source, method=spec["method"],
                  path=spec["path"], found=found, effect_refs=refs, lag_possible=within_lag if found is False else None)
        op.setdefault("observations", []).append(obs_id)
        self.save()
        return found, refs, obs_id

    def reconcile(self, op: dict) -> tuple[list[str], str | None, bool]:
        """Looks until found, or absent once the lag is past, or a bounded number of no-answers.
        Returns (refs, the observation that found them or proved absence, absent)."""
        spec = self.contract(op)["lookup"]
        lag = spec.get("lag_seconds") or 0.0
        negatives = 0
        for _ in range(14):
            found, refs, obs_id = self.lookup_once(op)
            if found:
                return refs, obs_id, False
            if found is False:
                negatives += 1
                if negatives >= 2 and time.time() - op["last_sent"] >= 1.5 * lag:
                    return [], obs_id, True
                time.sleep(0.2)
            else:
                time.sleep(0.5)
        return [], None, False

    # ---- closing --------------------------------------------------------------------------------
    def resolve(self, op: dict, state: str, refs: list[str], evidence: list[str], reason: str, **extra: Any) -> None:
        op["resolved"] = True
        self.save()
        self.emit("resolution", op["operation_id"], state=state, effect_refs=refs, evidence=evidence, reason=reason,
                  **extra)

    def duplicate(self, op: dict, refs: list[str], obs_id: str) -> None:
        correction = new_id("op")
        self.emit("operation", correction, intent={"kind": "compensate_duplicate",
                                                   "destination": op["intent"]["destination"],
                                                   "params": {"effect_refs": refs[1:]}},
                  correction_of_operation_id=op["operation_id"], owner="operator", state="open")
        self.resolve(op, "duplicate_effect_confirmed", refs, [obs_id], "reconciliation found several records",
                     correction_operation_id=correction)

    def dedup_in_force(self, op: dict) -> bool:
        if not op["key"]:
            return False
        retention = self.contract(op)["idempotency"]["retention_seconds"]
        return retention is None or time.time() - op["opened_at"] < 0.9 * retention

    def after_unknown(self, op: dict, reason: str) -> tuple[str, str] | None:
        """The effect may exist. A retry step (reason, decision), or None once resolved."""
        if self.contract(op).get("lookup"):
            refs, obs_id, absent = self.reconcile(op)
            if len(refs) > 1:
                return self.duplicate(op, refs, obs_id)  # type: ignore[arg-type, func-returns-value]
            if refs:
                return self.resolve(op, "succeeded", refs, [obs_id], "the lookup found the effect")  # type: ignore[func-returns-value]
            if absent:
                return reason, "retry: the lookup found no effect once the documented lag had passed"
        if self.dedup_in_force(op):
            return reason, "retry: the destination deduplicates this key and it is within retention"
        return self.resolve(op, "unknown", [], list(op["attempts"]), "no evidence either way: an operator decides")  # type: ignore[func-returns-value]

    def on_success(self, op: dict, attempt_id: str, outcome: Outcome, refs: list[str]) -> None:
        contract = self.contract(op)
        if contract["idempotency"]["style"] == "none" and contract.get("lookup") and self.transport(op) == "http":
            found, seen, obs_id = self.lookup_once(op, source="read_after_write")  # one 2xx proves no single effect
            every = sorted(set(seen) | set(refs))
            if len(every) > 1:
                return self.duplicate(op, every, obs_id)
        self.resolve(op, "succeeded", refs, [attempt_id], f"the destination answered {outcome.status}")

    def on_accepted(self, op: dict, attempt_id: str, outcome: Outcome) -> None:
        status_url = outcome.body["operation"]["status_url"]
        for wait in (0.2, 0.3, 0.5, 0.5, 1.0, 1.0, 2.0):
            time.sleep(wait)
            obs_id = new_id("obs")
            try:
                status = self.http(op, "GET", status_url).json()
            except (requests.RequestException, ValueError):
                status = {}
            done = status.get("status")
            refs = [str(status["effect_ref"])] if done == "succeeded" and status.get("effect_ref") else []
            self.emit("observation", op["operation_id"], observation_id=obs_id, source="status_poll", method="GET",
                      path=status_url, found=True if done == "succeeded" else (False if done == "failed" else None),
                      effect_refs=refs)
            if done == "succeeded":
                return self.resolve(op, "succeeded", refs, [attempt_id, obs_id], "the operation reported succeeded")
            if done == "failed":
                return self.resolve(op, "failed", [], [attempt_id, obs_id], "the operation reported failed")
        self.resolve(op, "unknown", [], [attempt_id], "still pending after polling: an operator decides")

    def on_in_progress(self, op: dict, attempt_id: str) -> tuple[str, str] | None:
        """A 409: the key is in use, the first request is still being processed: it may yet act."""
        time.sleep(0.5)
        return self.after_unknown(op, "response_lost_after_dispatch")

    def on_exit(self, op: dict, attempt_id: str, outcome: Outcome, refs: list[str]) -> None:
        status = outcome.body["exit_status"]
        kind = self.kind(op)
        if status == 0 or (kind.get("convergence_exit_status") is not None and status == kind["convergence_exit_status"]):
            return self.resolve(op, "succeeded", refs, [attempt_id], f"the command exited {status}")
        self.resolve(op, "failed", [], [attempt_id], f"the command exited {status}")

    # ---- the loop -------------------------------------------------------------------------------
    def resume(self, op: dict) -> tuple[str, str] | None:
        """Killed mid-attempt: the request may have left. Log it as such, then reconcile first."""
        attempt = op["pending"]
        op["pending"] = None
        self.log_attempt(op, attempt, Outcome("sent_no_response", error="agent restarted mid-attempt"), [])
        return self.after_unknown(op, "response_lost_after_dispatch")

    def handle(self, intent: dict) -> None:
        op = self.state.get(intent["intent_id"]) or self.open_operation(intent)
        if op["resolved"]:
            return
        step: tuple[str | None, str | None] | None = (None, None)
        if op.get("pending"):
            step = self.resume(op)
        while step is not None:
            if op["attempts"] and len(op["attempts"]) >= self.MAX_ATTEMPTS:
                return self.budget_spent(op)
            step = self.step(op, *step)

    def budget_spent(self, op: dict) -> None:
        self.resolve(op, "unknown", [], list(op["attempts"]), "attempt budget spent: an operator decides")

    def step(self, op: dict, reason: str | None, decision: str | None) -> tuple[str, str] | None:
        attempt_id, outcome, refs = self.dispatch(op, reason, decision)
        if outcome.state == "not_sent":
            return "connection_not_established", "retry: the connection was never established"
        if outcome.state != "response_received":
            return self.after_unknown(op, "response_lost_after_dispatch")
        if self.transport(op) == "ssh":
            return self.on_exit(op, attempt_id, outcome, refs)  # type: ignore[func-returns-value]
        if outcome.tool_error:  # an MCP error result: the tool's 5xx
            return self.after_unknown(op, "destination_5xx")
        status = outcome.status or 0
        if status == 429:
            time.sleep(min(self.retry_after(outcome), 5.0))
            return "rate_limited", "retry: a 429 means the destination did not act"
        if status == 409:
            return self.on_in_progress(op, attempt_id)
        if status >= 500:
            return self.after_unknown(op, "destination_5xx")
        if status == 202 and isinstance(outcome.body, dict) and outcome.body.get("operation"):
            return self.on_accepted(op, attempt_id, outcome)  # type: ignore[func-returns-value]
        if status < 300:
            return self.on_success(op, attempt_id, outcome, refs)  # type: ignore[func-returns-value]
        return self.resolve(op, "failed", [], [attempt_id], f"the destination refused: {status}")  # type: ignore[func-returns-value]

    def run(self) -> int:
        for intent in self.doc["intents"]:
            self.handle(intent)
        self.log.close()
        return 0


if __name__ == "__main__":
    sys.exit(Agent().run())
