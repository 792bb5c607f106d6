"""Held-out correct agent, style "look before every retry", on the standard library alone (urllib, no requests).
kind: correct
transport: http

Written from docs/contract.md alone. Whatever made an attempt fail (a refused connection, a 429, a 5xx, a
lost answer), it asks the destination first whether the effect exists, and retries only when the lookup
shows it absent past the documented lag, or the key deduplicates. One JSON file per operation in the state
dir, replaced atomically at every step.
"""
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

DOC = json.load(open(os.environ["HARNESS_INTENTS"], encoding="utf-8"))
LOG = open(os.environ["HARNESS_AUDIT_LOG"], "a", encoding="utf-8")
STATE = os.environ["HARNESS_STATE_DIR"]
SESSION = "ses_" + uuid.uuid4().hex[:10]
BUDGET = 3


def uid(prefix):
    return prefix + "_" + uuid.uuid4().hex[:12]


def fp(value):
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                 ensure_ascii=False).encode()).hexdigest()


def log(event, op, **fields):
    line = {"event": event, "ts": fields.pop("ts", time.time()), "session_id": SESSION,
            "operation_id": op["operation_id"], **{k: v for k, v in fields.items() if v is not None}}
    LOG.write(json.dumps(line) + "\n")
    LOG.flush()


def store(op):
    path = os.path.join(STATE, f"op-{op['intent']['intent_id']}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(op, f)
    os.replace(path + ".tmp", path)


def load(intent_id):
    try:
        with open(os.path.join(STATE, f"op-{intent_id}.json"), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def base(dest):
    return os.environ["HARNESS_DESTINATION_" + re.sub(r"[^A-Za-z0-9]", "_", dest).upper()].rstrip("/")


def request(dest, method, path, body=None, headers=None):
    """(dispatch_state, status, parsed body, headers, error)."""
    hdrs = {"Content-Type": "application/json", "Connection": "close", **(headers or {})}
    secret = os.environ.get("HARNESS_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", dest).upper())
    if secret:
        hdrs["Authorization"] = "Bearer " + secret
    url = path if path.startswith("http") else base(dest) + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=1.5) as answer:
            status, raw, got = answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as err:
        status, raw, got = err.code, err.read(), dict(err.headers)
    except urllib.error.URLError as err:
        if isinstance(err.reason, ConnectionRefusedError):
            return "not_sent", None, None, None, "connection refused"
        return "sent_no_response", None, None, None, str(err.reason)[:120]
    except (TimeoutError, ConnectionError, OSError) as err:  # sent; no (whole) answer
        return "sent_no_response", None, None, None, type(err).__name__
    try:
        parsed = json.loads(raw or b"{}")
    except ValueError:
        if 200 <= status < 300:
            return "sent_no_response", None, None, None, "unreadable 2xx body"
        parsed = {}
    return "response_received", status, parsed, got, None


def look(op, source="lookup"):
    """One lookup, logged: (found True/False/None, refs, observation id)."""
    spec = DOC["destinations"][op["intent"]["destination"]]["lookup"]
    field = op["kind"]["effect_ref_field"]
    query = urllib.parse.urlencode({spec["query_param"]: op["operation_id"]})
    state, status, body, _, _ = request(op["intent"]["destination"], spec["method"], f"{spec['path']}?{query}")
    found, refs = None, []
    if state == "response_received" and status == 200 and isinstance(body, dict):
        refs = [str(item[field]) for item in body.get(spec["result_field"]) or []]
        found = bool(refs)
    lagging = time.time() - op["last_sent"] < 1.5 * (spec.get("lag_seconds") or 0)
    obs = uid("obs")
    log("observation", op, observation_id=obs, source=source, method=spec["method"], path=spec["path"],
        found=found, effect_refs=refs, lag_possible=lagging if found is False else None)
    return found, refs, obs, lagging


def settle(op, why):
    """Before any retry: look. Returns 'retry', or None once resolved."""
    contract = DOC["destinations"][op["intent"]["destination"]]
    if contract["lookup"]:
        for _ in range(15):
            found, refs, obs, lagging = look(op)
            if found and len(refs) > 1:
                return duplicate(op, refs, obs)
            if found:
                return close(op, "succeeded", refs, [obs], "the lookup found it")
            if found is False and not lagging:
                op["absent_seen"] = obs
                return "retry"
            time.sleep(0.25)
    keyed = op["key"] and (contract["idempotency"]["retention_seconds"] is None or
                           time.time() - op["opened"] < 0.9 * contract["idempotency"]["retention_seconds"])
    if why == "not_sent" or why == "rate_limited" or keyed:
        return "retry"
    return close(op, "unknown", [], list(op["attempts"]), "no evidence either way: for an operator")


def close(op, state, refs, evidence, reason, **extra):
    op["done"] = state
    store(op)
    log("resolution", op, state=state, effect_refs=refs, evidence=evidence, reason=reason, **extra)


def duplicate(op, refs, obs):
    fix = {"operation_id": uid("op")}
    log("operation", fix, intent={"kind": "compensate_duplicate", "destination": op["intent"]["destination"],
                                  "params": {"effect_refs": refs[1:]}},
        correction_of_operation_id=op["operation_id"], owner="operator", state="open")
    close(op, "duplicate_effect_confirmed", refs, [obs], "two records for one intent",
          correction_operation_id=fix["operation_id"])


def attempt(op, reason):
    dest = op["intent"]["destination"]
    att = {"id": uid("att"), "at": time.time(), "trace": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"}
    op["inflight"], op["last_sent"] = att, att["at"]
    store(op)
    state, status, body, headers, error = request(dest, op["kind"]["method"], op["path"], op["body"],
                                                  {**op["headers"], "traceparent": att["trace"]})
    record(op, att, state, status, body, headers, error, reason)
    return att["id"], state, status, body, headers


def record(op, att, state, status, body, headers, error, reason):
    ref = body.get(op["kind"]["effect_ref_field"]) if isinstance(body, dict) and status and status < 300 \
        and status != 202 else None
    previous = op["attempts"][-1] if op["attempts"] else None
    op["attempts"].append(att["id"])
    op["inflight"] = None
    store(op)
    links = {"retry_of_attempt_id": previous, "retry_reason": reason, "prior_request_fingerprint": fp(op["body"]),
             "retry_decision": f"retry ({reason}) after looking first"} if previous else {}
    log("attempt", op, ts=att["at"], attempt_id=att["id"], attempt_number=len(op["attempts"]),
        destination=op["intent"]["destination"], method=op["kind"]["method"], path=op["path"],
        idempotency_key=op["key"], request_fingerprint=fp(op["body"]), dispatch_state=state, http_status=status,
        effect_refs=[str(ref)] if ref else None, error=error, traceparent=att["trace"],
        retry_after_seconds=float((headers or {}).get("Retry-After", 1)) if status == 429 else None,
        attempt_budget_remaining=BUDGET - len(op["attempts"]), **links)


def poll(op, att_id, body):
    url = body["operation"]["status_url"]
    for wait in (0.2, 0.3, 0.5, 0.5, 1, 1, 2):
        time.sleep(wait)
        _, status, got, _, _ = request(op["intent"]["destination"], "GET", url)
        said = got.get("status") if isinstance(got, dict) else None
        refs = [str(got["effect_ref"])] if said == "succeeded" else []
        obs = uid("obs")
        log("observation", op, observation_id=obs, source="status_poll", method="GET", path=url,
            found=True if said == "succeeded" else (False if said == "failed" else None), effect_refs=refs)
        if said in ("succeeded", "failed"):
            return close(op, said, refs, [att_id, obs], f"the operation reported {said}")
    close(op, "unknown", [], [att_id], "still pending: for an operator")


def carry_out(intent):
    op = load(intent["intent_id"])
    contract = DOC["destinations"][intent["destination"]]
    if op is None:
        kind = contract["operations"][intent["kind"]]
        op_id = uid("op")
        idem = contract["idempotency"]
        key = "idem_" + hashlib.sha256(op_id.encode()).hexdigest()[:24] if idem["style"] != "none" else None
        body = {**(kind.get("body_defaults") or {}), **intent["params"], kind["client_reference_field"]: op_id}
        headers = {}
        if key and idem["body_field"]:
            body[idem["body_field"]] = key
        elif key:
            headers[idem["header"]] = key
        op = {"operation_id": op_id, "intent": intent, "kind": kind, "key": key, "body": body, "headers": headers,
              "path": kind["path"].format(**intent["params"]), "attempts": [], "opened": time.time(),
              "last_sent": 0.0, "done": None, "inflight": None}
        store(op)
        old = load(intent["supersedes"]) if intent.get("supersedes") else None
        log("operation", op, intent_id=intent["intent_id"], intent=intent, idempotency_key=key, state="open",
            payload_fingerprint=fp(body), owner=SESSION, supersedes_operation_id=old and old["operation_id"])
    if op["done"]:
        return
    reason, verdict = None, "go"
    if op["inflight"]:  # killed while it was in flight
        record(op, op["inflight"], "sent_no_response", None, None, None, "restarted mid-attempt",
               "response_lost_after_dispatch" if op["attempts"] else None)
        reason, verdict = "response_lost_after_dispatch", settle(op, "lost")
    while verdict == "retry" or verdict == "go":
        if len(op["attempts"]) >= BUDGET:
            return close(op, "unknown", [], list(op["attempts"]), "budget spent: for an operator")
        att_id, state, status, body, headers = attempt(op, reason)
        if state == "not_sent":
            reason, verdict = "connection_not_established", settle(op, "not_sent")
        elif state == "sent_no_response":
            reason, verdict = "response_lost_after_dispatch", settle(op, "lost")
        elif status == 429:
            time.sleep(min(float((headers or {}).get("Retry-After", 1)), 5))
            reason, verdict = "rate_limited", settle(op, "rate_limited")
        elif status == 409:
            time.sleep(0.5)
            reason, verdict = "response_lost_after_dispatch", settle(op, "lost")
        elif status >= 500:
            reason, verdict = "destination_5xx", settle(op, "5xx")
        elif status == 202 and isinstance(body, dict) and body.get("operation"):
            return poll(op, att_id, body)
        elif status < 300:
            ref = str(body.get(op["kind"]["effect_ref_field"]))
            if contract["idempotency"]["style"] == "none" and contract["lookup"]:
                found, refs, obs, _ = look(op, "read_after_write")
                if len(set(refs) | {ref}) > 1:
                    return duplicate(op, sorted(set(refs) | {ref}), obs)
            return close(op, "succeeded", [ref], [att_id], f"answered {status}")
        else:
            return close(op, "failed", [], [att_id], f"refused: {status}")


for item in DOC["intents"]:
    carry_out(item)
LOG.close()
