"""``match_attempts`` (how ``correlate`` ties attempts to the wire) finds through its index what the scan it
replaced found: the same attempt gets the same wire record on any journal, however keys, fingerprints,
traceparents, routes and destinations collide or are missing. ``scan_correlate`` is the old quadratic scan, kept
here as the specification."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checker.context import OperationContext
from harness.checker.correlation import match_attempts, wire_records
from harness.checker.readings import bare_path, ts_value


def scan_correlate(ops: dict[str, OperationContext], journal_entries: list[dict[str, Any]],
                   requests: list[dict[str, Any]], destinations: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    journal = wire_records(journal_entries, requests, destinations)
    used: set[int] = set()
    pairs = [(op, a) for op in ops.values() for a in op.attempts]
    pairs.sort(key=lambda p: (ts_value(p[1].get("ts")), p[1].get("_line") or 0))
    sent = [p for p in pairs if p[1].get("dispatch_state") != "not_sent"]
    not_sent = [p for p in pairs if p[1].get("dispatch_state") == "not_sent"]

    def same_route(attempt: dict[str, Any], entry: dict[str, Any]) -> bool:
        method, path = attempt.get("method"), bare_path(attempt.get("path"))
        return ((not method or method.upper() == str(entry.get("method", "")).upper())
                and (not path or path == bare_path(entry.get("path"))))

    def by_trace(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return bool(a.get("traceparent")) and a.get("traceparent") == e.get("traceparent") and same_route(a, e)

    def by_key(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return (bool(a.get("idempotency_key")) and a.get("idempotency_key") == e.get("idempotency_key")
                and same_route(a, e))

    def by_fingerprint(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return (bool(a.get("request_fingerprint")) and a.get("request_fingerprint") == e.get("body_fingerprint")
                and same_route(a, e))

    def by_route(a: dict[str, Any], e: dict[str, Any]) -> bool:
        if not (a.get("method") and a.get("path")) or not same_route(a, e):
            return False
        for mine, theirs in (("idempotency_key", "idempotency_key"), ("request_fingerprint", "body_fingerprint"),
                             ("traceparent", "traceparent")):
            if a.get(mine) and e.get(theirs) and a.get(mine) != e.get(theirs):
                return False
        return True

    for group in (sent, not_sent):
        for predicate in (by_trace, by_key, by_fingerprint, by_route):
            for op, attempt in group:
                if attempt["attempt_id"] in op.wire:
                    continue
                destination = attempt.get("destination") or op.destination
                for index, entry in enumerate(journal):
                    if index in used:
                        continue
                    if destination and entry.get("destination") and entry.get("destination") != destination:
                        continue
                    if predicate(attempt, entry):
                        used.add(index)
                        op.wire[attempt["attempt_id"]] = entry
                        break
    return [e for i, e in enumerate(journal) if i not in used]


# few values, so that they collide; None and "" for a field not set
small = st.sampled_from([None, "", "a", "b"])
methods = st.sampled_from([None, "", "POST", "post", "GET", "PUT"])
paths = st.sampled_from([None, "", "/t", "/t?x=1", "/u", "?q"])
destinations = st.sampled_from([None, "", "tickets", "webhook"])
journal_values = st.one_of(small, st.just(["a"]), st.just({"k": "a"}))  # a hand-written journal may hold anything

attempts = st.fixed_dictionaries({
    "dispatch_state": st.sampled_from(["sent_no_response", "response_received", "not_sent", None]),
    "method": methods, "path": paths, "destination": destinations, "idempotency_key": small,
    "request_fingerprint": small, "traceparent": small, "ts": st.sampled_from([1.0, 2.0, 3.0, None]),
})
entries = st.fixed_dictionaries({
    "destination": destinations, "method": st.one_of(methods, st.just(7)), "path": paths,
    "idempotency_key": journal_values, "body_fingerprint": journal_values, "traceparent": journal_values,
    "seq": st.sampled_from([None, 1, 2, 3]),
})
ledger_rows = st.fixed_dictionaries({
    "seq": st.just(0), "destination": destinations, "method": methods, "path": paths,
    "idempotency_key": small, "payload_fingerprint": small, "traceparent": small,
    "flow_id": st.sampled_from([None, "f"]),
})


def build_ops(drawn: list[tuple[int, str | None, dict[str, Any]]]) -> dict[str, OperationContext]:
    ops: dict[str, OperationContext] = {}
    for line, (op_index, op_destination, attempt) in enumerate(drawn, start=1):
        op_id = f"op_{op_index}"
        op = ops.get(op_id)
        if op is None:
            op = ops[op_id] = OperationContext(op_id, offline=False)
            op.add({"event": "operation", "operation_id": op_id, "_line": 0,
                    "intent": {"destination": op_destination} if op_destination else None})
        op.add({"event": "attempt", "operation_id": op_id, "attempt_id": f"att_{line}", "_line": line,
                **{k: v for k, v in attempt.items() if v is not None}})
    return ops


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logged=st.lists(st.tuples(st.integers(0, 3), destinations, attempts), max_size=12),
       journal=st.lists(entries, max_size=12), requests=st.lists(ledger_rows, max_size=3))
def test_index_matches_what_the_scan_matched(logged: list[Any], journal: list[dict[str, Any]],
                                             requests: list[dict[str, Any]]) -> None:
    for line, entry in enumerate(journal, start=1):
        entry["_line"] = line
    for seq, row in enumerate(requests, start=1):
        row["seq"] = seq  # unique, so that a record is known by its content
    indexed, scanned = build_ops(logged), build_ops(logged)
    wire, left_indexed = match_attempts(indexed, journal, requests)
    left_scanned = scan_correlate(scanned, journal, requests)
    assert _by_content(wire) == _by_content({op_id: op.wire for op_id, op in scanned.items()})
    assert left_indexed == left_scanned
    assert all(not op.wire for op in indexed.values())  # a value returned, the operations left as they were


def _by_content(wire: dict[str, dict[str, dict[str, Any]]]) -> dict[tuple[str, str], Any]:
    return {(op_id, attempt_id): (entry.get("_line"), entry.get("flow_id"), entry.get("seq"))
            for op_id, matched in wire.items() for attempt_id, entry in matched.items()}


def test_index_takes_the_first_record_in_journal_order() -> None:
    """Two records fit one attempt; the first in the journal is its match, the second is left over."""
    ops = build_ops([(0, "tickets", {"dispatch_state": "response_received", "method": "POST", "path": "/t",
                                     "idempotency_key": "k", "ts": 1.0})])
    journal = [{"destination": "tickets", "method": "POST", "path": "/t", "idempotency_key": "k", "_line": 1,
                "seq": 1},
               {"destination": "tickets", "method": "POST", "path": "/t", "idempotency_key": "k", "_line": 2,
                "seq": 2}]
    wire, left = match_attempts(ops, journal, [])
    assert wire["op_0"]["att_1"]["_line"] == 1
    assert [e["_line"] for e in left] == [2]


@settings(max_examples=500, deadline=None)
@given(key=st.text("ab-1", max_size=6), ids=st.lists(st.text("ab-1", max_size=4), max_size=40))
def test_h003_finds_the_first_attempt_id_a_key_holds_however_it_looks(key: str, ids: list[str]) -> None:
    """H003's lookup (``first_id_in``: every id tried, or the key's substrings looked up when they are fewer)
    names the id the scan named."""
    from harness.checker.rules import first_id_in

    assert first_id_in(key, ids) == next((i for i in ids if i and i in key), None)
