"""The audit's fast path for clean operations never hides a finding the full rules would report."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.audit import clean_verdict
from harness.checker import OperationContext, judge_operation
from harness.events import validate_event


def clean_story() -> list[dict]:
    base = {"ts": 1.0, "session_id": "s", "operation_id": "op_1"}
    return [
        dict(base, event="operation", _line=1, intent_id="i", idempotency_key="idem-op_1", state="open"),
        dict(base, event="attempt", _line=2, attempt_id="a1", dispatch_state="response_received", http_status=201,
             idempotency_key="idem-op_1", method="POST", path="/t", effect_refs=["t1"], request_fingerprint="sha256:1"),
        dict(base, event="resolution", _line=3, state="succeeded", evidence=["a1"], effect_refs=["t1"]),
    ]


MUTATIONS = st.lists(st.tuples(
    st.integers(0, 2),
    st.sampled_from(["idempotency_key", "dispatch_state", "effect_refs", "evidence", "state", "retry_of_attempt_id",
                     "retry_reason", "method", "http_status", "attempt_budget_remaining", "supersedes_operation_id",
                     "parent_operation_id", "owner", "attempt_id"]),
    st.sampled_from([None, "a1", "idem-a1", "other", ["t1"], ["t1", "t2"], ["a1"], [], "GET", 429, -1, 0,
                     "sent_no_response", "failed", "succeeded", "response_received"])), max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=MUTATIONS, extra=st.sampled_from([None, "observation", "attempt", "resolution"]))
def test_fast_path_agrees_with_the_full_rules(mutations, extra):
    events = clean_story()
    for index, field, value in mutations:
        if value is None:
            events[index].pop(field, None)
        else:
            events[index][field] = value
    if extra == "observation":
        events.append({"event": "observation", "ts": 2.0, "session_id": "s", "operation_id": "op_1", "observation_id": "o1",
                       "found": False, "_line": 4})
    elif extra == "attempt":
        events.append(dict(events[1], attempt_id="a2", _line=4))
    elif extra == "resolution":
        events.append(dict(events[2], state="failed", _line=4))
    # the audit only judges events that passed validation
    assume(all(validate_event({k: v for k, v in e.items() if k != "_line"})[1] is None for e in events))
    op = OperationContext("op_1", offline=True)
    op.all_operation_ids = {"op_1"}
    for event in events:
        op.add(event)
    fast = clean_verdict(op)
    if fast is not None:
        full = judge_operation(op)
        assert full.findings == [] and full.classification == "healthy", (events, full.findings)
        assert fast.effects == full.effects and fast.state == full.state


def test_fast_path_takes_the_clean_story():
    op = OperationContext("op_1", offline=True)
    for event in clean_story():
        op.add(event)
    assert clean_verdict(op) is not None
