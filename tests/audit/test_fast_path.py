"""The audit's fast path for clean operations never hides a finding the full rules would report, and
gives exactly the verdict the full rules give."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.audit.article import article_record
from harness.audit.fast_path import clean_summary
from harness.audit.output import operation_json
from harness.checker import OperationContext, judge_operation
from harness.events import validate_event

BASE = {"ts": 1.0, "session_id": "s", "operation_id": "op_1"}


def clean_story() -> list[dict]:
    """One attempt, one response, one effect."""
    return [
        dict(BASE, event="operation", _line=1, intent_id="i", idempotency_key="idem-op_1", state="open",
             intent={"kind": "create_ticket", "destination": "tickets", "params": {"n": 1}}),
        dict(BASE, event="attempt", _line=2, attempt_id="a1", dispatch_state="response_received", http_status=201,
             idempotency_key="idem-op_1", method="POST", path="/t", effect_refs=["t1"], request_fingerprint="sha256:1",
             attempt_budget_remaining=2),
        dict(BASE, event="resolution", _line=3, state="succeeded", evidence=["a1"], effect_refs=["t1"]),
    ]


def lookup_story() -> list[dict]:
    """The response was lost; a lookup found the effect."""
    op, attempt, resolution = clean_story()
    attempt = dict(attempt, dispatch_state="sent_no_response", error="ReadTimeout")
    for key in ("http_status", "effect_refs"):
        attempt.pop(key)
    observation = dict(BASE, event="observation", _line=3, observation_id="o1", source="lookup", method="GET",
                       path="/t", found=True, effect_refs=["t1"])
    return [op, attempt, observation, dict(resolution, _line=4, evidence=["a1", "o1"])]


def retry_story() -> list[dict]:
    """The response was lost; a retry with the same key (dedup in force) got the answer."""
    op, first, _, resolution = lookup_story()
    second = dict(clean_story()[1], _line=3, ts=2.0, attempt_id="a2", attempt_number=2, retry_of_attempt_id="a1",
                  retry_reason="response_lost_after_dispatch", retry_decision="retry", attempt_budget_remaining=1,
                  prior_request_fingerprint="sha256:1")
    return [op, first, second, dict(resolution, ts=2.0, evidence=["a2"])]


STORIES = {"clean": clean_story, "lookup": lookup_story, "retry": retry_story}
IDS = [None, "a1", "a2", "a9", "o1", "p1", "", "other"]
REFS = [None, [], ["t1"], ["t2"], ["t1", "t2"], ["t1", "t1"]]
EVIDENCE = [None, [], ["a1"], ["a2"], ["o1"], ["a1", "o1"], ["a2", "o1"], ["a9"], ["a1", "a2"]]
KEYS = [None, "", "idem-op_1", "idem-a1", "idem-a2", "other"]
PRINTS = [None, "sha256:1", "sha256:2"]
# what to change, per kind of event, and the values worth trying (the boundaries of each rule)
CHANGES = {
    "operation": {"idempotency_key": KEYS, "supersedes_operation_id": [None, "op_2", "op_9"],
                  "parent_operation_id": [None, "op_2"], "owner": [None, "me"], "intent_id": [None, "i", "j"]},
    "attempt": {"idempotency_key": KEYS, "dispatch_state": ["not_sent", "sent_no_response", "response_received",
                                                            "execution_error"],
                "effect_refs": REFS, "retry_of_attempt_id": IDS, "attempt_id": ["a1", "a2", "a3", "idem", "op_1"],
                "retry_reason": [None, "response_lost_after_dispatch", "destination_5xx", "felt_like_it"],
                "method": [None, "POST", "PUT", "get", "HEAD"], "http_status": [None, 201, 202, 429, 500, 503],
                "attempt_budget_remaining": [None, -1, 0, 1, 2], "request_fingerprint": PRINTS,
                "prior_request_fingerprint": PRINTS, "retry_after_seconds": [None, 0.5, 30.0]},
    "observation": {"found": [None, True, False], "lag_possible": [None, True, False], "effect_refs": REFS,
                    "observation_id": ["o1", "o2", "a1"], "source": ["lookup", "callback", "operator"]},
    "resolution": {"state": ["succeeded", "failed", "unknown", "cancelled", "duplicate_effect_confirmed"],
                   "evidence": EVIDENCE, "effect_refs": REFS, "correction_operation_id": [None, "op_2", "op_1"],
                   "reason": [None, "ok"], "ts": [0.5, 1.0, 3.0]},
}


@st.composite
def mutation(draw, kinds: list[str]) -> tuple[int, str, object]:
    index = draw(st.integers(0, len(kinds) - 1))
    field = draw(st.sampled_from(sorted(CHANGES[kinds[index]])))
    return index, field, draw(st.sampled_from(CHANGES[kinds[index]][field]))


EXTRAS = st.one_of(st.none(), st.sampled_from(["observation", "attempt", "resolution", "approval", "operation"]))


def build(events: list[dict]) -> OperationContext:
    op = OperationContext("op_1", offline=True)
    op.all_operation_ids = {"op_1", "op_2"}
    peer = OperationContext("op_2", offline=True)  # an open operation of the same intent (H020's parent)
    peer.add(dict(BASE, event="operation", operation_id="op_2", intent_id="i", _line=0))
    op.peers = {"op_2": peer}
    for event in events:
        op.add(event)
    return op


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(story=st.sampled_from(sorted(STORIES)), data=st.data(), extra=EXTRAS,
       shared_key=st.one_of(st.just("unchanged"), st.sampled_from(KEYS)))
def test_fast_path_agrees_with_the_full_rules(story, data, extra, shared_key):
    events = STORIES[story]()
    if shared_key != "unchanged":  # one key everywhere: the operation's and every attempt's
        for event in events:
            if event["event"] in ("operation", "attempt"):
                event["idempotency_key"] = shared_key
    mutations = data.draw(st.lists(mutation([e["event"] for e in events]), max_size=3))
    for index, field, value in mutations:
        event = events[index]
        if value is None:
            event.pop(field, None)
        else:
            event[field] = value
    line = len(events) + 1
    if extra == "observation":
        events.append(dict(BASE, event="observation", observation_id="o9", found=False, _line=line))
    elif extra == "attempt":
        events.append(dict(events[1], attempt_id="a9", _line=line))
    elif extra == "resolution":
        events.append(dict(events[-1], state="failed", _line=line))
    elif extra == "approval":
        events.append(dict(BASE, event="approval", approval_id="p1", decision="approved", scope="retry", _line=line))
    elif extra == "operation":
        events.append(dict(events[0], _line=line, owner="someone"))
    # the audit only judges events that passed validation
    assume(all(validate_event({k: v for k, v in e.items() if k != "_line"})[1] is None for e in events))
    op = build(events)
    fast = clean_summary(op)
    if fast is not None:
        full = judge_operation(op, held=False)
        assert full.findings == [] and full.classification == "healthy", (events, full.findings)
        assert fast == operation_json(full), events


def test_fast_path_takes_the_common_clean_stories():
    for story in STORIES.values():
        op = build(story())
        assert clean_summary(op) == operation_json(judge_operation(op, held=False)), story.__doc__


def test_fast_path_leaves_a_blind_retry_to_the_rules():
    events = retry_story()
    events[2]["idempotency_key"] = "idem-a2"  # a fresh key per attempt: H002, H003, H010 must judge it
    op = build(events)
    assert clean_summary(op) is None
    assert {"H002", "H003", "H010"} <= {f.code for f in judge_operation(op).findings}


def test_fast_path_agrees_on_every_single_change():
    """Exhaustive over one change at a time (the property test above combines them at random)."""
    checked = taken = 0
    for story in STORIES.values():
        for index, kind in enumerate(e["event"] for e in story()):
            for field, values in CHANGES[kind].items():
                for value in values:
                    events = story()
                    if value is None:
                        events[index].pop(field, None)
                    else:
                        events[index][field] = value
                    if any(validate_event({k: v for k, v in e.items() if k != "_line"})[1] for e in events):
                        continue
                    op = build(events)
                    fast = clean_summary(op)
                    checked += 1
                    if fast is not None:
                        taken += 1
                        full = judge_operation(op, held=False)
                        assert full.findings == [] and full.classification == "healthy", (events, full.findings)
                        assert fast == operation_json(full), events
    assert checked > 300 and taken > 50, (checked, taken)


# -- the article's effect ledger (``type``: attempt | effect) -------------------------------------------------
LEDGER_CHANGES = {
    "attempt": {"idempotencyKey": [None, "", "k", "k-att_1", "k-att_2", "other"], "payloadHash": [None, "p1", "p2"],
                "result": [None, "success", "timeout", "refused", "lost", "http_500"],
                "attemptId": ["att_1", "att_2", "k"],
                "observedAt": [None, "2026-03-02T10:00:00Z", "2026-03-02T09:00:00Z", "2026-03-02T11:00:00Z",
                               "yesterday", 1.0, 1e10]},
    "effect": {"effectRef": ["t1", "t2"],
               "observedAt": [None, "2026-03-02T10:00:00Z", "2026-03-02T09:00:00Z", "2026-03-02T11:00:00Z",
                              "soon", 1e10]},
}


def ledger_line(kind: str, **fields: object) -> dict:
    base = {"type": "attempt", "operationId": "op_1", "attemptId": "att_1", "idempotencyKey": "k",
            "payloadHash": "p1", "result": "success", "observedAt": "2026-03-02T10:00:00Z"} if kind == "attempt" \
        else {"type": "effect", "operationId": "op_1", "effectRef": "t1", "observedAt": "2026-03-02T10:00:00Z"}
    return {**base, **fields}


def ledger_op(lines: list[dict]) -> OperationContext | None:
    op = OperationContext("op_1", fmt="ledger", offline=True)
    for number, raw in enumerate(lines, 1):
        record, error = article_record(raw, number)
        if record is None:  # a malformed line: the audit never hands it to an operation
            return None
        op.add(record)
    return op


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(attempts=st.integers(1, 3), effects=st.integers(0, 2), data=st.data())
def test_ledger_fast_path_agrees_with_the_full_rules(attempts: int, effects: int, data: st.DataObject) -> None:
    lines = [ledger_line("attempt", attemptId=f"att_{n}", result="timeout" if n < attempts else "success")
             for n in range(1, attempts + 1)] + [ledger_line("effect") for _ in range(effects)]
    order = data.draw(st.permutations(range(len(lines))))
    lines = [lines[i] for i in order]
    for _ in range(data.draw(st.integers(0, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        changes = LEDGER_CHANGES[lines[index]["type"]]
        field = data.draw(st.sampled_from(sorted(changes)))
        lines[index][field] = data.draw(st.sampled_from(changes[field]))
    op = ledger_op(lines)
    assume(op is not None)
    fast = clean_summary(op)
    if fast is not None:
        full = judge_operation(op, held=False)
        assert full.findings == [] and full.classification == "healthy", (lines, full.findings)
        assert fast == operation_json(full), lines


def test_ledger_fast_path_takes_the_clean_stories_and_leaves_the_rest() -> None:
    retried = [ledger_line("attempt", result="timeout"), ledger_line("attempt", attemptId="att_2"),
               ledger_line("effect")]
    for lines in ([ledger_line("attempt"), ledger_line("effect")], retried):
        op = ledger_op(lines)
        assert op is not None and clean_summary(op) == operation_json(judge_operation(op, held=False))
    blind = [ledger_line("attempt", result="timeout", idempotencyKey=None),
             ledger_line("attempt", attemptId="att_2", idempotencyKey=None), ledger_line("effect"),
             ledger_line("effect", effectRef="t2")]
    op = ledger_op(blind)
    assert op is not None and clean_summary(op) is None and judge_operation(op, held=False).findings
