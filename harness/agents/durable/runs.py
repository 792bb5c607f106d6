"""One run of an engine's unit of work (a Celery task, a DBOS step...): one attempt of its operation, kept in
``HARNESS_STATE_DIR`` before it dispatches, so that a rerun (or the agent) learns what a dead run had in flight.

The engine decides to rerun; the run only says what it is: the first attempt, or a rerun of the operation's last
attempt with the engine's reason. A rerun that finds the last attempt without an outcome logs it again as
``sent_no_response`` (its process died before it learnt what it got). Whether the rerun is safe is the key's
business: the caller passes the key it derived from the engine's identity of the work (or, the wrong agents,
minted).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV, destination_env_name, secret_env_name
from harness.recorder import Recorder

TIMEOUT = (1.0, 1.5)  # connect, read: the catalogue's client timeout
MAX_RUNS = 3  # runs of one unit of work a body allows itself: an engine may rerun without end


@dataclass(frozen=True)
class Attempted:
    """What one run's attempt got: its id, the status (None: no answer) and the effect it names."""

    attempt_id: str
    status: int | None
    effect_refs: list[str]

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and self.status != 202


def runs_of(engine: str, op_id: str) -> Path:
    """The folder of an operation's runs: one file per run's attempt, written before it dispatches, then with its
    outcome (the state dir outlives the process that ran it)."""
    runs = Path(os.environ[STATE_DIR_ENV]) / engine / op_id
    runs.mkdir(parents=True, exist_ok=True)
    return runs


def kept_runs(engine: str, op_id: str) -> list[dict[str, Any]]:
    """The runs of an operation so far, in order."""
    return [json.loads(p.read_text()) for p in sorted(runs_of(engine, op_id).glob("*.json"))]


def log_dead_run(recorder: Recorder, op_id: str, run: dict[str, Any], then: str) -> None:
    """The attempt of a run that died after it dispatched and before it learnt what it got: unknown to whoever
    logs it now (the rerun, or the agent), so ``sent_no_response``."""
    recorder.attempt(op_id, run["attempt_id"], "sent_no_response", **run["logged"],
                     error=f"the process that ran it died before logging its outcome ({then})")


def resolve_unknown(recorder: Recorder, engine: str, op_id: str, *, then: str, reason: str) -> None:
    """The operation resolved ``unknown`` on its kept runs (the attempts of runs that died logged first): its
    work may have committed before it failed; left to reconciliation."""
    runs = kept_runs(engine, op_id)
    for run in runs:
        if run.get("outcome") is None:
            log_dead_run(recorder, op_id, run, then)
    recorder.resolution(op_id, "unknown", effect_refs=[], evidence=[run["attempt_id"] for run in runs],
                        reason=reason)


def resolve_answered(recorder: Recorder, op_id: str, got: dict[str, Any], reason: str) -> str:
    """The operation resolved on the answer its last run got (``got``: attempt_id, status, effect_refs): succeeded
    on a 2xx but 202, else unknown. Returns the state."""
    status = got.get("status")
    state = "succeeded" if isinstance(status, int) and 200 <= status < 300 and status != 202 else "unknown"
    recorder.resolution(op_id, state, effect_refs=got["effect_refs"], evidence=[got["attempt_id"]],
                        reason=f"{reason} got {status}")
    return state


def run_once(engine: str, op_id: str, intent: dict[str, Any], contract: dict[str, Any], *, key: str, worker: str,
             reason: str, decision: str, rerun_by: str) -> Attempted:
    """One run's attempt of ``op_id``: a rerun (an earlier run kept) links to the last one with the engine's
    ``reason``; a dead run's attempt is logged first (``rerun_by`` says who reran it). Raises RuntimeError after
    MAX_RUNS runs."""
    import requests

    recorder = Recorder(os.environ[AUDIT_LOG_ENV])
    try:
        earlier = kept_runs(engine, op_id)
        prior = earlier[-1] if earlier else None
        if prior is not None and prior.get("outcome") is None:
            log_dead_run(recorder, op_id, prior, rerun_by)
        if len(earlier) >= MAX_RUNS:
            raise RuntimeError(f"{op_id}: run {len(earlier)} times already; not sending again")
        route = contract["operations"][intent["kind"]]
        headers = {contract["idempotency"].get("header") or "Idempotency-Key": key}
        if token := os.environ.get(secret_env_name(intent["destination"])):
            headers["Authorization"] = f"Bearer {token}"
        body = {**(route.get("body_defaults") or {}), **intent["params"]}
        path = route["path"].format(**intent["params"])
        url = os.environ[destination_env_name(intent["destination"])].rstrip("/") + path
        attempt_id = "att_" + uuid.uuid4().hex[:12]
        linked: dict[str, Any] = {}
        if prior is not None:
            linked = {"retry_of_attempt_id": prior["attempt_id"], "retry_reason": reason, "retry_decision": decision}
        logged = {"attempt_number": len(earlier) + 1, "destination": intent["destination"], "method": route["method"],
                  "path": path, "idempotency_key": key, "worker": worker,
                  "attempt_budget_remaining": MAX_RUNS - len(earlier) - 1, **linked}
        pending = runs_of(engine, op_id) / f"{len(earlier) + 1:03d}-{attempt_id}.json"
        pending.write_text(json.dumps({"attempt_id": attempt_id, "logged": logged, "outcome": None}))
        try:
            answer = requests.request(route["method"], url, json=body, headers=headers, timeout=TIMEOUT)
        except requests.RequestException as exc:
            outcome: dict[str, Any] = {"dispatch_state": "sent_no_response", "error": type(exc).__name__}
            got = Attempted(attempt_id, None, [])
        else:
            refs = [ref] if (ref := effect_ref(answer)) else []
            outcome = {"dispatch_state": "response_received", "http_status": answer.status_code, "effect_refs": refs}
            got = Attempted(attempt_id, answer.status_code, refs)
        pending.write_text(json.dumps({"attempt_id": attempt_id, "logged": logged, "outcome": outcome}))
        recorder.attempt(op_id, attempt_id, **outcome, **logged)
        return got
    finally:
        recorder.close()


def effect_ref(answer: Any) -> str | None:
    try:
        doc = answer.json()
    except ValueError:
        return None
    return str(doc["id"]) if isinstance(doc, dict) and doc.get("id") else None
