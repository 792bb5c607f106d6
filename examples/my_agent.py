"""A minimal agent written from docs/contract.md alone (delegated intents are run in-process)."""
import asyncio
import hashlib
import json
import os
import re
import shlex
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import asyncssh
import requests

ENV = os.environ
DOC = json.loads(Path(ENV["HARNESS_INTENTS"]).read_text(encoding="utf-8"))
LOG = open(ENV["HARNESS_AUDIT_LOG"], "a", encoding="utf-8")
STATE_FILE = Path(ENV["HARNESS_STATE_DIR"]) / "operations.json"
STATE = json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else {}
SESSION = "ses_" + uuid.uuid4().hex[:12]
MAX_ATTEMPTS = 3
TIMEOUT = (1.0, 1.5)  # connect, read (s): under the 2.2 s hold of timeout_late_success


def new_id(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def fingerprint(value):  # sha256: + hex of the canonical JSON
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def emit(event, op_id, **fields):
    record = {"event": event, "ts": time.time(), "session_id": SESSION, "operation_id": op_id}
    record.update({k: v for k, v in fields.items() if v is not None})
    LOG.write(json.dumps(record) + "\n")
    LOG.flush()


def save():  # atomically: a kill leaves the old state or the new one
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(STATE))
    os.replace(tmp, STATE_FILE)


def env_suffix(name):
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def call(op, method, path, **kwargs):
    dest = op["intent"]["destination"]
    headers = {"Connection": "close", **kwargs.pop("headers", {})}
    secret = ENV.get("HARNESS_SECRET_" + env_suffix(dest))
    if secret:
        headers["Authorization"] = "Bearer " + secret  # sent, never logged
    url = ENV["HARNESS_DESTINATION_" + env_suffix(dest)].rstrip("/") + path
    return requests.request(method, url, headers=headers, timeout=TIMEOUT, **kwargs)


def open_operation(intent):
    contract = DOC["destinations"][intent["destination"]]
    kind = contract["operations"][intent["kind"]]
    idem = contract["idempotency"]
    op_id = new_id("op")
    headers = {}
    if kind["method"] == "EXEC":  # SSH: the command line; the marker's operation id is the key
        params = {name: shlex.quote(str(value)) for name, value in intent["params"].items()}
        path = kind["command"].format(**{"operation_id": op_id, **params})
        body = shlex.split(path)
        key = op_id if kind.get("dedup") == "operation_marker" else None
    else:
        path = kind["path"].format(**intent["params"])
        body = {**(kind.get("body_defaults") or {}), **intent["params"], kind["client_reference_field"]: op_id}
        key = "key_" + hashlib.sha256(op_id.encode()).hexdigest()[:24] if idem["style"] != "none" else None
        if key and idem["body_field"]:
            body[idem["body_field"]] = key
        elif key:
            headers[idem["header"]] = key
    op = {"operation_id": op_id, "intent": intent, "kind": kind, "key": key, "body": body, "headers": headers,
          "path": path, "attempts": [], "opened_at": time.time(), "last_sent": 0.0, "resolved": False}
    STATE[intent["intent_id"]] = op
    save()  # persisted before anything is dispatched
    superseded = STATE.get(intent.get("supersedes") or "", {}).get("operation_id")
    emit("operation", op_id, intent_id=intent["intent_id"], intent=intent, idempotency_key=key,
         payload_fingerprint=fingerprint(body), state="open", owner=SESSION,
         supersedes_operation_id=superseded)
    return op


def resolve(op, state, refs, evidence, reason, **extra):
    op["resolved"] = True
    save()
    emit("resolution", op["operation_id"], state=state, effect_refs=refs, evidence=evidence,
         reason=reason, **extra)


def log_attempt(op, attempt, dispatch_state, status=None, refs=None, error=None, retry_after=None):
    previous = op["attempts"][-1] if op["attempts"] else None
    op["attempts"].append(attempt["attempt_id"])
    save()
    retry = {}
    if previous:
        retry = {"retry_of_attempt_id": previous, "retry_reason": attempt["reason"],
                 "retry_decision": attempt["decision"], "prior_request_fingerprint": fingerprint(op["body"])}
    emit("attempt", op["operation_id"], ts=attempt["sent_at"], attempt_id=attempt["attempt_id"],
         attempt_number=len(op["attempts"]), destination=op["intent"]["destination"],
         method=op["kind"]["method"], path=op["path"], idempotency_key=op["key"],
         request_fingerprint=fingerprint(op["body"]), dispatch_state=dispatch_state, http_status=status,
         effect_refs=refs, error=error, traceparent=attempt["traceparent"], retry_after_seconds=retry_after,
         attempt_budget_remaining=MAX_ATTEMPTS - len(op["attempts"]), **retry)


def dispatch(op, reason, decision):
    trace = hashlib.sha256(op["operation_id"].encode()).hexdigest()[:32]
    attempt = {"attempt_id": new_id("att"), "sent_at": time.time(), "reason": reason, "decision": decision,
               "traceparent": f"00-{trace}-{uuid.uuid4().hex[:16]}-01"}
    op["pending"] = attempt
    op["last_sent"] = attempt["sent_at"]
    save()  # a kill from here on leaves a record to reconcile on restart
    if op["kind"]["method"] == "EXEC":
        state, status, body, error = asyncio.run(send_ssh(op, attempt))
        refs = [line.split(":", 1)[1].strip() for line in (body or {}).get("stdout", "").splitlines()
                if line.startswith("effect_ref:")]
    else:
        state, status, body, error = send_http(op, attempt)
        ref = body.get(op["kind"]["effect_ref_field"]) if isinstance(body, dict) and status and status < 300 else None
        refs = [str(ref)] if ref else []
    del op["pending"]
    retry_after = float(body.get("retry_after", 1)) if status == 429 else None
    log_attempt(op, attempt, state, status, refs or None, error, retry_after)
    return attempt["attempt_id"], state, status, body, refs, retry_after


def send_http(op, attempt):
    try:
        response = call(op, op["kind"]["method"], op["path"], json=op["body"],
                        headers={**op["headers"], "traceparent": attempt["traceparent"]})
    except requests.ConnectTimeout:
        return "not_sent", None, None, "connect timeout"
    except requests.ConnectionError as exc:  # refused: nothing left; anything else: it may have
        refused = "NewConnectionError" in repr(exc) or "refused" in str(exc).lower()
        return "not_sent" if refused else "sent_no_response", None, None, str(exc)[:200]
    except requests.Timeout as exc:
        return "sent_no_response", None, None, f"read timeout: {exc}"[:200]
    except requests.RequestException as exc:  # the status came, its body broke off (a bad chunk): it may have acted
        return "sent_no_response", None, None, f"answer cut short: {type(exc).__name__}"
    try:
        body = response.json()
    except ValueError:  # a 2xx whose body is unreadable names no effect: as good as no answer
        if response.ok:
            return "sent_no_response", None, None, "answer body unreadable"
        body = {}
    if response.status_code == 429 and isinstance(body, dict):  # dispatch logs and honours it
        body["retry_after"] = response.headers.get("Retry-After", "1")
    return "response_received", response.status_code, body, None


async def send_ssh(op, attempt):
    url = urlsplit(ENV["HARNESS_DESTINATION_" + env_suffix(op["intent"]["destination"])])
    try:
        conn = await asyncssh.connect(url.hostname, url.port, username="agent", known_hosts=None,
                                      client_keys=None, agent_path=None, connect_timeout=TIMEOUT[0])
    except (OSError, asyncssh.Error) as exc:
        return "not_sent", None, None, f"ssh connect failed: {type(exc).__name__}"
    try:
        async with conn:
            result = await asyncio.wait_for(conn.run(op["path"], env={"TRACEPARENT": attempt["traceparent"]}), 10)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        return "sent_no_response", None, None, f"ssh session lost: {type(exc).__name__}"
    if result.exit_status is None:  # the connection dropped before the exit status
        return "sent_no_response", None, None, "connection lost before the exit status"
    return "response_received", None, {"exit_status": result.exit_status, "stdout": str(result.stdout)}, None


def lookup(op):
    """Observations until the effect is found, or absence is credible (lag waited out). Returns
    (refs, observation ids, absent)."""
    spec = DOC["destinations"][op["intent"]["destination"]]["lookup"]
    lag = spec.get("lag_seconds") or 0.0
    seen, negatives = [], 0
    for _ in range(12):
        obs_id, found, refs = new_id("obs"), None, []
        try:
            response = call(op, spec["method"], spec["path"], params={spec["query_param"]: op["operation_id"]})
            if response.ok:
                refs = [str(item[op["kind"]["effect_ref_field"]]) for item in response.json()[spec["result_field"]]]
                found = bool(refs)
        except (requests.RequestException, ValueError, KeyError):
            pass  # unanswered: proves nothing either way
        within_lag = time.time() - op["last_sent"] < lag * 1.5
        emit("observation", op["operation_id"], observation_id=obs_id, source="lookup", method=spec["method"],
             path=spec["path"], found=found, effect_refs=refs, lag_possible=within_lag if found is False else None)
        seen.append(obs_id)
        if found:
            return refs, seen, False
        if found is False:
            negatives += 1
            if negatives >= 3 and not within_lag:
                return [], seen, True
        time.sleep(0.2 if found is False else 0.5)
    return [], seen, False


def dedup_in_force(op):
    idem = DOC["destinations"][op["intent"]["destination"]]["idempotency"]
    retention = idem["retention_seconds"]
    return bool(op["key"]) and (retention is None or time.time() - op["opened_at"] < 0.9 * retention)


def after_unknown(op, reason):
    """The effect may exist. Returns (reason, decision) for a retry, or None once resolved."""
    if DOC["destinations"][op["intent"]["destination"]]["lookup"]:
        refs, seen, absent = lookup(op)
        if len(refs) > 1:
            return duplicate(op, refs, seen[-1])
        if refs:
            return resolve(op, "succeeded", refs, [seen[-1]], "lookup by client reference found the effect")
        if absent:
            return reason, "retry: the lookup found no effect after waiting out the index lag"
    if dedup_in_force(op):
        return reason, "retry: the destination deduplicates this key and it is within retention"
    return resolve(op, "unknown", [], list(op["attempts"]), "no evidence either way; escalating to an operator")


def duplicate(op, refs, obs_id):
    correction = new_id("op")
    emit("operation", correction, intent={"kind": "compensate_duplicate", "destination": op["intent"]["destination"],
                                          "params": {"effect_refs": refs[1:]}},
         correction_of_operation_id=op["operation_id"], owner="operator", state="open")
    resolve(op, "duplicate_effect_confirmed", refs, [obs_id], "reconciliation found several records",
            correction_operation_id=correction)


def succeeded(op, attempt_id, status, body):
    ref = body.get(op["kind"]["effect_ref_field"]) if isinstance(body, dict) else None
    contract = DOC["destinations"][op["intent"]["destination"]]
    if status == 202 and isinstance(body, dict) and body.get("operation"):  # accepted, not done: poll
        for wait in (0.2, 0.3, 0.5, 0.5, 1.0, 1.0, 2.0):
            time.sleep(wait)
            obs_id = new_id("obs")
            try:
                status_body = call(op, "GET", body["operation"]["status_url"]).json()
            except (requests.RequestException, ValueError):  # no readable answer: poll again
                status_body = {}
            done = status_body.get("status") == "succeeded"
            refs = [str(status_body["effect_ref"])] if done else []
            emit("observation", op["operation_id"], observation_id=obs_id, source="status_poll", method="GET",
                 path=body["operation"]["status_url"], found=done, effect_refs=refs)
            if done:
                return resolve(op, "succeeded", refs, [attempt_id, obs_id], "the operation reported succeeded")
        return resolve(op, "unknown", [], [attempt_id], "still pending; escalating")
    if contract["idempotency"]["style"] == "none" and contract["lookup"]:  # one 2xx proves no single effect
        refs, seen, _ = lookup(op)
        if len(set(refs) | {str(ref)}) > 1:
            return duplicate(op, sorted(set(refs) | {str(ref)}), seen[-1])
    resolve(op, "succeeded", [str(ref)], [attempt_id], f"destination answered {status}")


def handle(intent):
    op = STATE.get(intent["intent_id"]) or open_operation(intent)
    if op["resolved"]:
        return
    step = None, None
    if op.get("pending"):  # killed while this attempt was in flight: its fate is unknown
        log_attempt(op, op.pop("pending"), "sent_no_response", error="agent restarted mid-attempt")
        step = after_unknown(op, "response_lost_after_dispatch")
    while op["attempts"] == [] or step is not None:
        if op["attempts"] and len(op["attempts"]) >= MAX_ATTEMPTS:
            return resolve(op, "unknown", [], list(op["attempts"]), "attempt budget spent; escalating")
        attempt_id, state, status, body, refs, retry_after = dispatch(op, *step)
        if state == "not_sent":
            step = "connection_not_established", "retry: the connection was never established"
        elif state == "sent_no_response":
            step = after_unknown(op, "response_lost_after_dispatch")
        elif op["kind"]["method"] == "EXEC":
            if body["exit_status"] == 0:
                return resolve(op, "succeeded", refs, [attempt_id], "the command exited 0")
            return resolve(op, "failed", [], [attempt_id], f"the command exited {body['exit_status']}")
        elif status == 429:
            time.sleep(min(retry_after or 1.0, 5.0))
            step = "rate_limited", "retry: a 429 means the destination did not act"
        elif status >= 500:
            step = after_unknown(op, "destination_5xx")
        elif status < 300:
            return succeeded(op, attempt_id, status, body)
        else:
            return resolve(op, "failed", [], [attempt_id], f"the destination refused: {status}")


for intent in DOC["intents"]:
    handle(intent)
LOG.close()
