"""The audit event models, their published JSON Schema, and the fast pre-check agreeing with pydantic."""

from __future__ import annotations

import json

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.events import (
    SCHEMA_PATH,
    VOUCH_PLANS,
    parse_line,
    parse_line_pydantic,
    schema_text,
    validate_event,
    vouch_for,
    vouch_for_fields,
)

GOOD = [
    {"event": "operation", "ts": 1.5, "session_id": "s", "operation_id": "op_1", "intent_id": "i", "state": "open",
     "intent": {"kind": "k", "destination": "d", "params": {}}, "idempotency_key": "op_1"},
    {"event": "attempt", "ts": "2026-01-01T00:00:00Z", "session_id": "s", "operation_id": "op_1", "attempt_id": "a",
     "dispatch_state": "sent_no_response", "http_status": None, "effect_refs": ["t"], "custom_field": 3},
    {"event": "observation", "ts": 2, "session_id": "s", "operation_id": "op_1", "observation_id": "o",
     "source": "lookup", "found": False, "lag_possible": True},
    {"event": "resolution", "ts": 3.0, "session_id": "s", "operation_id": "op_1", "state": "unknown",
     "evidence": ["a", "o"]},
    {"event": "approval", "ts": 4.0, "session_id": "s", "operation_id": "op_1", "approval_id": "p",
     "decision": "approved", "scope": "retry"},
]


def test_published_schema_file_is_up_to_date():
    assert SCHEMA_PATH.read_text() == schema_text(), "run: python -m harness.events"


def test_schema_accepts_the_contract_examples_and_rejects_a_bad_dispatch_state():
    schema = json.loads(SCHEMA_PATH.read_text())
    for record in GOOD:
        jsonschema.validate(record, schema)
        assert parse_line(json.dumps(record))[1] is None and validate_event(record)[1] is None
    bad = dict(GOOD[1], dispatch_state="lost")
    try:
        jsonschema.validate(bad, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("schema accepted dispatch_state 'lost'")


def test_validation_error_names_field_value_and_choices():
    _, error = validate_event(dict(GOOD[3], state="done"))
    assert error.startswith("resolution event: field 'state' 'done'")
    assert "'succeeded'" in error and "'duplicate_effect_confirmed'" in error
    _, error = validate_event({"event": "attempted", "operation_id": "x"})
    assert error == "field 'event' is 'attempted'; valid: operation, attempt, observation, resolution, approval"
    _, error = validate_event(dict(GOOD[1]) | {"attempt_id": None})
    assert "field 'attempt_id' None" in error


values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(2**63 - 2, 2**65), st.just({"n": 18446744073709551616}), st.just([1.5, 2]),
                   st.text(max_size=5), st.just("3"), st.just("1.5"),
                   st.sampled_from(["sent_no_response", "open", "lookup", "approved", "retry", "unknown"]),
                   st.lists(st.text(max_size=3), max_size=2), st.lists(st.integers(), max_size=2),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
FIELDS = ["note", "intent_id", "retry_after_seconds", "source", "event", "ts", "session_id", "operation_id",
          "attempt_id", "observation_id", "approval_id", "dispatch_state", "state", "source", "decision", "scope",
          "found", "lag_possible", "effect_refs", "evidence", "http_status",
          "seq", "hash", "intent", "idempotency_key", "attempt_budget_remaining", "retry_after_seconds"]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(GOOD), changes=st.dictionaries(st.sampled_from(FIELDS), values, max_size=3),
       drop=st.lists(st.sampled_from(FIELDS), max_size=2))
def test_fast_line_parser_agrees_with_the_models(base, changes, drop):
    record = dict(base)
    record.update(changes)
    for name in drop:
        record.pop(name, None)
    parsed, error = parse_line(json.dumps(record))
    model_error = validate_event(record)[1]
    assert (error is None) == (model_error is None), (record, error, model_error)
    if error is not None:
        assert error == model_error

    slow = parse_line_pydantic(json.dumps(record))
    assert json.dumps(slow, sort_keys=True) == json.dumps((parsed, error), sort_keys=True)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=3), max_leaves=8)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(GOOD),
       extra=st.dictionaries(st.sampled_from(FIELDS + ["params", "x"]), json_values, max_size=2),
       cut=st.integers(0, 400), junk=st.sampled_from(["", " ", "\t", ",", "}", "\\", r"\ud800", "NaN", "1e999"]))
def test_fast_parse_equals_pydantic_on_any_text(base, extra, cut, junk):
    """orjson + the field checks give pydantic's exact answer: the record, or the same error text."""
    text = json.dumps(dict(base, **extra))
    for candidate in (text, text[:cut] + junk + text[cut:], text[:cut]):
        # compared as sorted JSON: that tells 1 from 1.0 and True, and NaN equals NaN
        fast, slow = parse_line(candidate), parse_line_pydantic(candidate)
        assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True), candidate
    record = dict(base, **extra)
    # the per-shape checkers and the field walk (past 1024 shapes) agree
    if isinstance(record.get("event"), str) and record["event"] in VOUCH_PLANS:
        assert vouch_for(record) == vouch_for_fields(record, *VOUCH_PLANS[record["event"]])


TRICKY = [None, True, False, 0, 1, -1, 1.0, 1.5, 2**70, "", "1", "x", "open", "lookup", "approved", "retry",
          "sent_no_response", "succeeded", [], ["a"], [1], [1.5], ["a", None], {}, {"a": 1}, {"a": 1.5}, {"a": [2**70]}]


def test_fast_parse_equals_pydantic_for_every_field_and_tricky_value():
    """Exhaustive: each field of each event (and an extra one) set to each tricky value, or dropped."""
    checked = 0
    for base in GOOD + [dict(good, ts=1.5) for good in GOOD]:  # a float ts: the fast path takes it
        for name in [*VOUCH_PLANS[base["event"]][0], "extra_field"]:
            for value in [*TRICKY, "drop"]:
                record = dict(base)
                if value == "drop":
                    record.pop(name, None)
                else:
                    record[name] = value
                for text in (json.dumps(record), json.dumps(record, separators=(",", ":"))):
                    fast, slow = parse_line(text), parse_line_pydantic(text)
                    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True), text
                    checked += 1
    assert checked > 2000


def test_limits_make_a_hostile_line_malformed_not_a_crash():
    from harness.ndjson import MAX_DEPTH, decode, limit_error

    base = '{"event":"operation","ts":1.0,"session_id":"s","operation_id":"op_1","x":'
    at_limit = base + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert limit_error(at_limit) is None
    assert parse_line(at_limit)[0] is not None
    for text, why in [(base + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", "nested deeper than 64 levels"),
                      (base + "[" * 1000 + "]" * 1000 + "}", "nested deeper than 64 levels"),
                      (base + "9" * 401 + "}", "an integer of more than 400 digits"),
                      (base + '"\\udc00"}', "a lone surrogate escape (\\ud800-\\udfff): not Unicode text")]:
        assert parse_line(text) == (None, why)
        assert parse_line_pydantic(text) == (None, why)
        assert decode(text) == (None, why)
    # not beyond them: brackets and digits inside a string, a long fraction, a surrogate pair
    for text in [base + '"' + "[" * 100 + "9" * 500 + '"}', base + "0." + "1" * 500 + "}", base + '"\\ud83d\\ude00"}']:
        assert limit_error(text) is None, text
