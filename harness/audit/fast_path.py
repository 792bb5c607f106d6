"""The fast path for clean operations: their JSON verdict without running every rule.

Property tests (tests/audit/test_fast_path.py) hold ``clean_summary`` equal to ``judge_operation``, for our
events and for the article's effect ledger.
"""

from __future__ import annotations

from typing import Any

from harness.checker import OperationContext, observation_view, resolution_view
from harness.checker.context import SAFE_METHODS
from harness.checker.readings import ts_value
from harness.events import RETRY_REASONS


def _attempt_json(attempt: dict[str, Any]) -> dict[str, Any]:
    """``AttemptVerdict.to_dict()`` of an offline attempt (no wire, no ledger rows)."""
    return {"attempt_id": attempt["attempt_id"], "dispatch_state": attempt.get("dispatch_state"),
            "key": attempt.get("idempotency_key"), "line": attempt.get("_line"),
            "retry_of_attempt_id": attempt.get("retry_of_attempt_id"), "retry_reason": attempt.get("retry_reason"),
            "wire": None, "destination_saw": []}


def clean_summary(op: OperationContext) -> dict[str, Any] | None:
    """The JSON verdict of a common clean story without running every rule, or None when it is not one.

    The stories: one operation event (nothing superseded or delegated), no approval, one or two
    attempts with one idempotency key (or none) that does not contain an attempt id, and one
    ``succeeded`` resolution citing only ids the operation holds, logged before it, one of which proves
    the success (a 2xx other than 202, an exit 0, a lookup that found the effect), and naming its one
    distinct effect.
    A second attempt must be a linked, budgeted retry of the first with the same payload, and when
    the first lost its response or got a 5xx the shared key is what justifies it; at most one observation (a
    lookup that reconciled a lost response). No rule can fire on these, and the dict equals
    ``judge_operation``'s (a property test holds both against the full rules), so a production log
    of mostly clean operations audits fast.
    """
    if op.format == "ledger":
        return _ledger_summary(op)
    attempts = op.attempts
    if (op.format != "events" or len(op.operations) != 1 or len(op.resolutions) != 1 or op.approvals
            or op.log_effects or not attempts or len(attempts) > 2 or len(op.observations) > 1):
        return None
    declared, resolution, first = op.operations[0], op.resolutions[0], attempts[0]
    if (resolution.get("state") != "succeeded" or declared.get("supersedes_operation_id")
            or declared.get("parent_operation_id") or first.get("retry_of_attempt_id") or first.get("retry_reason")):
        return None
    key = first.get("idempotency_key")
    for attempt in attempts:
        method = attempt.get("method")
        if (attempt.get("idempotency_key") != key or (attempt.get("attempt_budget_remaining") or 0) < 0
                or (method and method.upper() in SAFE_METHODS)
                or (key and attempt["attempt_id"] in key)):
            return None
    if key and key != (declared.get("idempotency_key") or key):
        return None
    if len(attempts) == 2:
        second = attempts[1]
        prior = second.get("prior_request_fingerprint")
        if (second.get("retry_of_attempt_id") != first["attempt_id"] or second.get("retry_reason") not in RETRY_REASONS
                or second.get("attempt_budget_remaining") is None or first.get("attempt_budget_remaining") == 0
                or first.get("http_status") == 429
                or second.get("request_fingerprint") != first.get("request_fingerprint")
                or (prior and prior != first.get("request_fingerprint"))
                or (not key and (first.get("dispatch_state") == "sent_no_response"
                                 or (first.get("http_status") or 0) >= 500))):
            return None
    refs = op.effect_refs()
    named = resolution.get("effect_refs")
    cited = resolution.get("evidence")
    if len(refs) != 1 or not named or not cited:
        return None
    only = refs[0]
    for ref in named:
        if ref != only:
            return None
    attempt_ids = op.attempt_index  # op.evidence_ids without building a set (there is no approval)
    observation_ids = [o["observation_id"] for o in op.observations]
    line = resolution.get("_line") or 0
    ts = ts_value(resolution.get("ts"))
    proven = False
    freshest = 0
    for evidence_id in cited:
        if evidence_id in attempt_ids:
            record = attempts[attempt_ids[evidence_id]]
            status = record.get("http_status")
            proven = proven or (record.get("dispatch_state") == "response_received" and (
                (status is None and record.get("exit_status") in (0, None))
                or (isinstance(status, int) and 200 <= status < 300 and status != 202)))
        elif evidence_id in observation_ids:
            record = op.observations[observation_ids.index(evidence_id)]
            proven = proven or record.get("found") is True
        else:
            return None
        freshest = max(freshest, record.get("_line") or 0)
        # H026: the evidence comes before the closure, by line and by timestamp
        last_line = max(n or 0 for n in record.get("_lines") or [record.get("_line")])
        if last_line > line or ts_value(record.get("ts")) > ts:
            return None
    if not proven:  # H025: one cited id must prove the success
        return None
    for attempt in attempts:  # H034: nothing cited is older than the last dispatch
        if attempt.get("dispatch_state") != "not_sent" and (attempt.get("_line") or 0) > freshest:
            return None
    return {"operation_id": op.operation_id, "intent_id": declared.get("intent_id"), "intent": declared.get("intent"),
            "classification": "healthy", "state": "succeeded", "attempts": [_attempt_json(a) for a in attempts],
            "effects": list(refs), "findings": [], "observations": [observation_view(o) for o in op.observations],
            "resolution": resolution_view(resolution)}



def _ledger_summary(op: OperationContext) -> dict[str, Any] | None:
    """The article's clean story (``triage._ARTICLE_CLEAN`` says it in SQL): one or two attempts under one
    non-empty key and one payload, the key holding no attempt's id, and effect lines naming one effect, each
    timed no earlier than the first attempt that was sent. No operation, observation or resolution line."""
    attempts, effects = op.attempts, op.log_effects
    if (not attempts or len(attempts) > 2 or not effects or op.operations or op.observations or op.resolutions
            or op.approvals or len(op.history) != len(attempts) + len(effects)):
        return None
    first = attempts[0]
    key, payload = first.get("idempotency_key"), first.get("request_fingerprint")
    if not key or payload is None:
        return None
    sent = 0.0
    for attempt in attempts:
        if ("_lines" in attempt or attempt.get("idempotency_key") != key
                or attempt.get("request_fingerprint") != payload or attempt["attempt_id"] in key):
            return None
        if attempt.get("dispatch_state") != "not_sent":
            ts = ts_value(attempt.get("ts"))
            sent = ts if not sent else min(sent, ts)
    if sent <= 0.0:
        return None
    for effect in effects:
        if ts_value(effect.get("ts")) < sent:
            return None
    refs = op.effect_refs()
    if len(refs) != 1 or op.classify() != "healthy":
        return None
    return {"operation_id": op.operation_id, "intent_id": None, "intent": None, "classification": "healthy",
            "state": op.state, "attempts": [_attempt_json(a) for a in attempts], "effects": list(refs),
            "findings": [], "observations": [], "resolution": None}
