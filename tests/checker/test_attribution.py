"""Black-box attribution: each write on the wire, each ledger row and each effect given to one intent
(harness.checker.attribution; the rule is in docs/checker.md, 'Black-box mode')."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.checker.attribution import (
    IntentContext,
    WireAttempt,
    attribute,
    flat_params,
    holds_params,
    param_text,
    retry_after_seconds,
    summary_key_behaviour,
)
from harness.contract import path_template_pattern
from harness.evidence import Evidence
from tests.common.evidence_builder import SSH_CONTRACT, TICKETS_CONTRACT

PAYMENTS_CONTRACT = {
    "service": "api", "idempotency": {"style": "stripe", "header": "Idempotency-Key"}, "lookup": None,
    "operations": {"create_payment": {"method": "POST", "path": "/v1/payments"},
                   "capture_payment": {"method": "POST", "path": "/v1/payments/{id}/capture"}},
}


class Run:
    """A run's wire and ledger, told flow by flow."""

    def __init__(self, contracts: dict[str, dict[str, Any]] | None = None) -> None:
        self.evidence = Evidence(destinations={name: {"spec": {"name": name}, "contract": contract}
                                               for name, contract in (contracts or {"pay": PAYMENTS_CONTRACT}).items()})
        self.clock = 1_700_000_000.0

    def intent(self, intent_id: str, params: dict[str, Any], kind: str = "create_payment",
               destination: str = "pay") -> None:
        self.evidence.intents.append({"intent_id": intent_id, "kind": kind, "destination": destination,
                                      "params": params})

    def flow(self, *, destination: str = "pay", method: str = "POST", path: str = "/v1/payments",
             kind: str | None = "create_payment", params: dict[str, Any] | None = None, key: str | None = None,
             body: str | None = None, effect: str | None = None, reached: bool = True, status: int = 200,
             proxied: bool = True) -> str:
        self.clock += 0.1
        flow_id = f"flw_{len(self.evidence.journal) + 1}" if proxied else None
        if proxied:
            self.evidence.journal.append({
                "seq": len(self.evidence.journal) + 1, "flow_id": flow_id, "ts_request": self.clock,
                "ts_done": self.clock + 0.01, "destination": destination, "method": method, "path": path,
                "body_fingerprint": body, "idempotency_key": key, "forwarded": reached,
                "client_outcome": "response", "client_status": status, "_line": len(self.evidence.journal) + 1})
        if reached:
            seq = len(self.evidence.requests) + 1
            self.evidence.requests.append({
                "seq": seq, "destination": destination, "method": method, "path": path, "flow_id": flow_id,
                "idempotency_key": key, "payload_fingerprint": body, "status": status, "received_at": self.clock,
                "outcome": "committed" if effect else "read" if method == "GET" else "rejected",
                "effect_ref": effect, "kind": kind, "params": json.dumps(params) if params is not None else None})
            if effect:
                self.evidence.effects.append({"seq": len(self.evidence.effects) + 1, "destination": destination,
                                              "effect_ref": effect, "flow_id": flow_id, "request_seq": seq,
                                              "replay": 0})
        return flow_id or f"ledger:{len(self.evidence.requests)}"

    def owners(self) -> dict[str, tuple[str, str]]:
        """flow id -> (intent id, how it was attributed)."""
        return {a.flow_id: (ctx.intent_id, a.how) for ctx in attribute(self.evidence).intents.values()
                for a in ctx.attempts}


def test_one_intent_of_a_kind_owns_every_write_of_that_kind_whatever_its_params():
    run = Run()
    run.intent("charge", {"amount": 1999, "currency": "EUR"})
    first = run.flow(params={"amount": 1999, "currency": "EUR"}, effect="pay_1")
    drifted = run.flow(params={"amount": 2000, "currency": "EUR"})
    assert run.owners() == {first: ("charge", "only intent"), drifted: ("charge", "only intent")}


def test_two_intents_of_one_kind_are_told_apart_by_their_params_compared_as_text():
    """A form body's params are strings: the intent's 1999 is the row's "1999"."""
    run = Run()
    run.intent("small", {"amount": 1999, "currency": "EUR"})
    run.intent("large", {"amount": 50000, "currency": "EUR"})
    large = run.flow(params={"amount": "50000", "currency": "EUR"}, effect="pay_1")
    small = run.flow(params={"amount": 1999, "currency": "EUR", "description": "extra fields do not matter"})
    assert run.owners() == {large: ("large", "kind and params"), small: ("small", "kind and params")}


def test_nested_params_match_a_form_bodys_bracketed_names():
    run = Run()
    run.intent("a", {"amount": 5, "metadata": {"order_id": "A1"}})
    run.intent("b", {"amount": 5, "metadata": {"order_id": "B2"}})
    flow = run.flow(params={"amount": "5", "metadata[order_id]": "B2"})
    assert run.owners() == {flow: ("b", "kind and params")}


def test_the_intent_with_the_most_params_held_wins_and_a_tie_is_ambiguous():
    run = Run()
    run.intent("any", {"currency": "EUR"})
    run.intent("precise", {"currency": "EUR", "amount": 5})
    run.intent("twin", {"currency": "EUR", "customer": "c1"})
    precise = run.flow(params={"currency": "EUR", "amount": 5})
    tie = run.flow(params={"currency": "EUR", "amount": 5, "customer": "c1"}, effect="pay_9")
    result = attribute(run.evidence)
    assert {a.flow_id for a in result.intents["precise"].attempts} == {precise}
    [write, effect] = result.unattributed
    assert write.kind == "write" and write.record["flow_id"] == tie
    assert write.reason == "its params hold those of intents precise, twin alike"
    assert effect.kind == "effect" and effect.record["effect_ref"] == "pay_9"
    assert effect.reason == f"the write that committed it (flow {tie}) is no intent's: {write.reason}"


def test_a_flow_that_never_reached_the_destination_is_the_one_intent_of_its_route():
    run = Run()
    run.intent("charge", {"amount": 5})
    run.intent("capture", {"id": "pay_1"}, kind="capture_payment")
    throttled = run.flow(reached=False, status=429)
    capture = run.flow(path="/v1/payments/pay_1/capture", reached=False, status=503)
    assert run.owners() == {throttled: ("charge", "route"), capture: ("capture", "route")}


def test_a_proxy_only_flow_of_a_shared_route_takes_the_intent_of_the_same_body_else_it_is_no_ones():
    run = Run()
    run.intent("a", {"amount": 1})
    run.intent("b", {"amount": 2})
    refused = run.flow(reached=False, status=503, body="sha256:bbb")
    committed = run.flow(params={"amount": 2}, body="sha256:bbb", effect="pay_1")
    stranger = run.flow(reached=False, status=503, body="sha256:ccc")
    result = attribute(run.evidence)
    assert [a.flow_id for a in result.intents["b"].attempts] == [refused, committed]
    assert result.intents["b"].attempts[0].how == "fingerprint"
    assert [(u.record["flow_id"], u.reason) for u in result.unattributed] == [
        (stranger, "POST /v1/payments serves intents a, b alike")]


def test_a_row_whose_params_hold_neither_intent_follows_its_key():
    """A retry that changed its payload under the first attempt's key (the drift H044 names) is that intent's."""
    run = Run()
    run.intent("a", {"amount": 1})
    run.intent("b", {"amount": 2})
    first = run.flow(params={"amount": 2}, key="k-b", effect="pay_1")
    drifted = run.flow(params={"amount": 3}, key="k-b", status=400)
    assert run.owners() == {first: ("b", "kind and params"), drifted: ("b", "key")}


def test_reads_are_no_attempts_and_writes_to_no_operation_are_unattributed():
    run = Run()
    run.intent("charge", {"amount": 5})
    run.flow(method="GET", path="/v1/payments/pay_1", kind=None, params=None)
    stray = run.flow(path="/v1/refunds", kind=None, params=None, status=404)
    result = attribute(run.evidence)
    assert result.intents["charge"].attempts == []
    assert [(u.record["flow_id"], u.reason) for u in result.unattributed] == [
        (stray, "POST /v1/refunds is no operation of pay")]


def test_a_kind_no_intent_asks_for_is_said_so():
    run = Run()
    run.intent("charge", {"amount": 5})
    run.flow(path="/v1/payments/pay_1/capture", kind="capture_payment", params={"id": "pay_1"}, effect="cap_1")
    [write, effect] = attribute(run.evidence).unattributed
    assert write.reason == "no intent asks for capture_payment on pay"
    assert effect.record["effect_ref"] == "cap_1"


def test_ssh_rows_stand_in_for_the_wire_and_are_attributed_by_kind():
    run = Run({"web1": SSH_CONTRACT})
    run.intent("key", {"username": "deployer", "public_key": "ssh-ed25519 AAAA"}, kind="install_key",
               destination="web1")
    flow = run.flow(destination="web1", method="EXEC", path="install-key deployer 'ssh-ed25519 AAAA'",
                    kind="install_key", params={"argv": ["install-key", "deployer", "ssh-ed25519 AAAA"]},
                    effect="key_1", proxied=False)
    result = attribute(run.evidence)
    [attempt] = result.intents["key"].attempts
    assert (attempt.flow_id, attempt.how, attempt.proxied) == (flow, "only intent", False)
    assert attempt.unknown() is None  # what the client saw is not recorded: never judged unknown
    assert result.intents["key"].effect_refs() == ["key_1"]


def test_an_effect_follows_its_request_seq_when_the_row_has_no_flow_id():
    run = Run({"tickets": TICKETS_CONTRACT})
    run.intent("t", {"title": "x"}, kind="create_ticket", destination="tickets")
    run.flow(destination="tickets", path="/tickets", kind="create_ticket", params={"title": "x"}, effect="tkt_1")
    run.evidence.effects[0]["flow_id"] = None
    assert attribute(run.evidence).intents["t"].effect_refs() == ["tkt_1"]


@pytest.mark.parametrize("value, text", [("1999", "1999"), (1999, "1999"), (19.99, "19.99"), (True, "true"),
                                         (None, "null"), ("EUR", "EUR")])
def test_a_param_as_text(value, text):
    assert param_text(value) == text


def test_params_flatten_to_form_names_and_holding_compares_leaves():
    assert flat_params({"a": {"b": {"c": 1}}, "l": [1, "x"], "e": {}}) == {"a[b][c]": "1", "l[0]": "1",
                                                                          "l[1]": "x", "e": "{}"}
    assert holds_params({"amount": "5", "metadata[order_id]": "A1", "x": 1}, {"metadata": {"order_id": "A1"}})
    assert not holds_params({"amount": "5"}, {"amount": 6})
    assert not holds_params(None, {"amount": 5})


@pytest.mark.parametrize("template, path, matches", [
    ("/v1/payments", "/v1/payments", True), ("/v1/payments", "/v1/payments/", True),
    ("/v1/payments/{id}/capture", "/v1/payments/pi_1/capture", True),
    ("/v1/payments/{id}/capture", "/v1/payments/a/b/capture", False), ("/v1/payments", "/v1/paymentsX", False),
    ("/a.b", "/aXb", False),
])
def test_a_route_path_with_placeholders_matches_one_path(template, path, matches):
    assert bool(path_template_pattern(template, trailing_slash=True).match(path)) is matches
    # the destinations' routing: no trailing slash, each {name} a group
    assert bool(path_template_pattern(template).match(path)) is (matches and not path.endswith("/"))


def test_a_path_template_names_its_placeholders():
    found = path_template_pattern("/v1/{account}/items/{id}").match("/v1/acct_1/items/it_2")
    assert found is not None and found.groupdict() == {"account": "acct_1", "id": "it_2"}
    assert path_template_pattern("/a/{id}").fullmatch("/a/x/y") is None


@pytest.mark.parametrize("header, seconds", [("2", 2.0), (" 1.5 ", 1.5), ("-3", 0.0), ("soon", None), (None, None),
                                             ("Wed, 01 Dec 2027 00:00:10 GMT", 10.0)])
def test_retry_after_is_seconds_or_an_http_date_counted_from_the_answer(header, seconds):
    from email.utils import parsedate_to_datetime

    answered = parsedate_to_datetime("Wed, 01 Dec 2027 00:00:00 GMT").timestamp()
    assert retry_after_seconds({"client_retry_after": header, "ts_done": answered}) == seconds


def _intent_with_keys(*keys: str | None) -> IntentContext:
    ctx = IntentContext({"intent_id": "i", "kind": "k", "destination": "d"})
    ctx.attempts = [WireAttempt({"flow_id": f"f{n}", "idempotency_key": key, "ts_request": n, "ts_done": n + 0.5},
                                [], "only intent") for n, key in enumerate(keys)]
    return ctx


@pytest.mark.parametrize("keys, said", [
    ((), "-"), (("k",), "one key on 1 attempt"), (("k", "k"), "one key on 2 attempts"), ((None, None), "no key"),
    (("k", "j"), "key changed"), ((None, "k"), "key changed"),
])
def test_key_behaviour(keys, said):
    assert _intent_with_keys(*keys).key_behaviour() == said


def test_the_runs_key_behaviour_over_several_intents_is_the_worst_one():
    one, other, blind, changed = (_intent_with_keys("k", "k"), _intent_with_keys("j"), _intent_with_keys(None),
                                  _intent_with_keys("a", "b"))
    assert summary_key_behaviour([one]) == "one key on 2 attempts"
    assert summary_key_behaviour([one, other]) == "one key per intent on 3 attempts"
    assert summary_key_behaviour([one, blind]) == "no key"
    assert summary_key_behaviour([blind, changed, one]) == "key changed"
    assert summary_key_behaviour([_intent_with_keys()]) == "-"
    assert _intent_with_keys("k", "k", "k").retry_gaps() == [0.5, 0.5]


@pytest.mark.parametrize("retry_body, drift", [("wire-1", False), ("wire-2", True)])
def test_a_key_s_payloads_compare_from_one_source(retry_body: str, drift: bool) -> None:
    """A 429 the proxy answered never reached the destination, so only its wire fingerprint exists; the
    retry's ledger fingerprint is of the parsed params (a form body, less a client token) and never equals a
    wire one: the retry is compared on the wire too, and is drift only when its body changed."""
    run = Run()
    run.intent("charge", {"amount": 1999})
    run.flow(params={"amount": 1999}, key="k-1", body="wire-1", reached=False, status=429)
    run.flow(params={"amount": 1999}, key="k-1", body=retry_body, effect="pay_1")
    run.evidence.requests[-1]["payload_fingerprint"] = "destination-1"  # what the destination read
    ctx = attribute(run.evidence).intents["charge"]
    assert bool(ctx.key_fingerprints()) is drift
    assert ctx.classify() == ("key_conflict" if drift else "healthy")
