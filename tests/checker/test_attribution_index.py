"""``attribute`` attributes through its indexes what the scans it replaced attributed: the same write to
the same intent, by the same step, with the same reason when it is no intent's, on generated runs where
intents share destinations, kinds and params and flows share bodies and keys. ``scan_attribute`` is the
old quadratic attribution (steps 1-4), kept here as the specification."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checker.attribution import (
    NAMED_INTENTS,
    Attribution,
    IntentContext,
    attribute,
    flat_params,
    holds_params,
    is_write,
    named_intents,
    row_params,
)
from harness.checker.correlation import wire_records
from harness.checker.readings import bare_path
from harness.contract import DestinationContract, path_template_pattern
from harness.evidence import Evidence
from tests.checker.test_attribution import PAYMENTS_CONTRACT, Run


def scan_attribute(evidence: Evidence) -> dict[str, tuple[str, str] | str]:
    """flow id -> (intent id, how), or the reason it is no intent's."""
    result = Attribution()
    contracts = {name: DestinationContract.from_dict(entry["contract"]) for name, entry in evidence.destinations.items()
                 if isinstance(entry, dict) and entry.get("contract") is not None}
    for intent in evidence.intents:
        if intent.get("intent_id"):
            destination = str(intent.get("destination"))
            result.intents.setdefault(str(intent["intent_id"]), IntentContext(intent, contracts.get(destination)))
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in evidence.requests:
        rows_of.setdefault(str(row.get("flow_id") or f"ledger:{row.get('seq')}"), []).append(row)
    writes = [e for e in wire_records(evidence.journal, evidence.requests, evidence.destinations)
              if is_write(e, rows_of)]
    owner: dict[int, tuple[IntentContext, str]] = {}
    why: dict[int, str] = {}
    for index, entry in enumerate(writes):
        found = _scan_rows(result, rows_of.get(str(entry.get("flow_id")), []))
        if found is None:
            found = _scan_route(result, entry, contracts)
        if isinstance(found, str):
            why[index] = found
        else:
            owner[index] = found
    changed = True
    while changed:
        changed = False
        for index, entry in enumerate(writes):
            if index in owner:
                continue
            found = _scan_likeness(entry, [(writes[i], ctx) for i, (ctx, _) in owner.items()])
            if found is not None:
                owner[index] = found
                changed = True
    return {str(entry.get("flow_id")): (owner[i][0].intent_id, owner[i][1]) if i in owner
            else why.get(i, "no intent matches it") for i, entry in enumerate(writes)}


def _scan_rows(result: Attribution, rows: list[dict[str, Any]]) -> tuple[IntentContext, str] | str | None:
    for row in rows:
        kind = row.get("kind")
        if not kind:
            continue
        candidates = [c for c in result.intents.values() if c.destination == row.get("destination") and c.kind == kind]
        if not candidates:
            return f"no intent asks for {kind} on {row.get('destination')}"
        if len(candidates) == 1:
            return candidates[0], "only intent"
        params = row_params(row)
        holding = [c for c in candidates if holds_params(params, c.intent.get("params") or {})]
        if holding:
            most = max(len(flat_params(c.intent.get("params") or {})) for c in holding)
            best = [c for c in holding if len(flat_params(c.intent.get("params") or {})) == most]
            if len(best) == 1:
                return best[0], "kind and params"
            return f"its params hold those of intents {named_intents(best)} alike"
        return f"its params hold those of none of the intents {named_intents(candidates)}"
    return None


def _scan_route(result: Attribution, entry: dict[str, Any],
                contracts: dict[str, DestinationContract]) -> tuple[IntentContext, str] | str:
    destination, method, path = entry.get("destination"), str(entry.get("method") or "").upper(), bare_path(
        entry.get("path"))
    contract = contracts.get(str(destination))
    kinds = {kind for kind, op in (contract.operations.items() if contract is not None else ())
             if op.method.upper() == method and op.path and path
             and path_template_pattern(op.path, trailing_slash=True).match(path)}
    if not kinds:
        return f"{method} {path} is no operation of {destination}"
    candidates = [c for c in result.intents.values() if c.destination == destination and c.kind in kinds]
    if len(candidates) == 1:
        return candidates[0], "route"
    if not candidates:
        return f"no intent asks for {', '.join(sorted(kinds))} on {destination}"
    return f"{method} {path} serves intents {named_intents(candidates)} alike"


def _scan_likeness(entry: dict[str, Any],
                   attributed: list[tuple[dict[str, Any], IntentContext]]) -> tuple[IntentContext, str] | None:
    for name, how in (("body_fingerprint", "fingerprint"), ("idempotency_key", "key")):
        value = entry.get(name)
        if not value:
            continue
        owners = {id(ctx): ctx for other, ctx in attributed
                  if other.get(name) == value and other.get("destination") == entry.get("destination")}
        if len(owners) == 1:
            return next(iter(owners.values())), how
    return None


def indexed(evidence: Evidence) -> dict[str, tuple[str, str] | str]:
    result = attribute(evidence)
    out: dict[str, tuple[str, str] | str] = {a.flow_id: (ctx.intent_id, a.how) for ctx in result.intents.values()
                                             for a in ctx.attempts}
    out.update({str(u.record.get("flow_id")): u.reason for u in result.unattributed if u.kind == "write"})
    return out


params = st.dictionaries(st.sampled_from(["amount", "currency", "note"]), st.sampled_from([1, "1", 2, "EUR"]),
                         max_size=3)
intents = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), params,
                             st.sampled_from(["create_payment", "capture_payment"]), st.sampled_from(["pay", "other"])),
                   max_size=6)
flows = st.lists(st.fixed_dictionaries({
    "params": st.one_of(st.none(), params), "kind": st.sampled_from([None, "create_payment", "capture_payment"]),
    "path": st.sampled_from(["/v1/payments", "/v1/payments/p1/capture", "/elsewhere"]),
    "key": st.sampled_from([None, "k1", "k2"]), "body": st.sampled_from([None, "sha256:x", "sha256:y"]),
    "reached": st.booleans(), "proxied": st.booleans(), "destination": st.sampled_from(["pay", "other"]),
}), max_size=10)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(declared=intents, sent=flows)
def test_indexes_attribute_what_the_scans_attributed(declared: list[Any], sent: list[dict[str, Any]]) -> None:
    run = Run({"pay": PAYMENTS_CONTRACT, "other": PAYMENTS_CONTRACT})
    for intent_id, wanted, kind, destination in declared:
        run.intent(intent_id, wanted, kind=kind, destination=destination)
    for flow in sent:
        proxied = flow.pop("proxied")
        run.flow(**flow, proxied=proxied or not flow["reached"])
    assert indexed(run.evidence) == scan_attribute(run.evidence)


def test_a_reason_names_the_first_intents_and_counts_the_rest() -> None:
    """Of 25 intents none of whose params a write holds, the reason names NAMED_INTENTS and counts the others."""
    run = Run()
    for n in range(25):
        run.intent(f"i{n:02d}", {"amount": n})
    flow = run.flow(params={"amount": 99})
    reason = indexed(run.evidence)[flow]
    shown = ", ".join(f"i{n:02d}" for n in range(NAMED_INTENTS))
    assert reason == f"its params hold those of none of the intents {shown} and {25 - NAMED_INTENTS} more"
    assert json.dumps(reason).count("i2") == 0  # i20..i24 are counted, not named
