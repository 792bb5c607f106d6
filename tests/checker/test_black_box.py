"""Black-box mode: the verdict of a program that writes no audit log, from the wire and the ledger alone.
The rules' right and flawed stories are in test_rules.py; these are their judgement calls."""

from __future__ import annotations

import json

import pytest

from harness.checker import RULES, Verdict, check, expectation_findings
from harness.checker.black_box_rules import MAX_WIRE_ATTEMPTS, NOT_JUDGED, NOT_JUDGED_STATES
from harness.evidence import load_evidence
from harness.report import render_text
from tests.common.evidence_builder import PAYLOAD, EvidenceBuilder, codes, reference_lookup_run


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence").black_box()


def test_only_the_black_box_rules_run_and_the_verdict_says_what_they_cannot_judge(b):
    b.intent()
    b.request(effect="tkt_1")
    verdict = b.check()
    assert verdict.passed and verdict.mode == "black_box" and verdict.operations == []
    assert verdict.rules_run == [r.label for r in RULES.values() if "black_box" in r.requires]
    [intent] = verdict.intents
    assert (intent.intent_id, intent.effects, intent.key_behaviour, intent.classification) == (
        "int_1", ["tkt_1"], "one key on 1 attempt", "healthy")
    assert verdict.not_judged == list(NOT_JUDGED)
    text = render_text(verdict)
    assert text.startswith("verdict: PASSED (black-box: judged from the proxy journal and the effect ledger alone")
    assert "not judged in black-box mode" in text and "operation ids:" in text
    assert "unknown logged as unknown:" in text and "evidence-backed closure:" in text


def test_a_log_the_program_did_write_is_ignored_in_black_box_mode(tmp_path):
    """`check --black-box` on a folder with a log: the log's findings are not the wire's."""
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)
    b.resolution("op_1", "failed", evidence=[])  # H015, H006... from the log
    evidence = load_evidence(b.write())
    assert not check(evidence).passed
    verdict = check(evidence, black_box=True)
    assert verdict.passed, render_text(verdict)
    assert [i.effects for i in verdict.intents] == [["tkt_1"]]


def test_the_verdict_crosses_processes_as_data(b):
    b.intent()
    b.request(key=None, lost=True, effect="tkt_1")
    b.request(key=None, effect="tkt_2")
    verdict = b.check()
    again = Verdict.from_dict(json.loads(json.dumps(verdict.to_dict())))
    assert again.to_dict() == verdict.to_dict()
    assert again.black_box and again.intents[0].findings[0].intent_id == "int_1"
    assert {f.subject for f in again.findings} == {"intent int_1"}


def test_a_changed_key_and_a_first_attempt_without_one_are_h041(b):
    b.intent()
    b.request(key=None, lost=True, status=500)
    b.request(key="idem-a", lost=True, status=500)
    b.request(key="idem-b", effect="tkt_1")
    messages = [f.message for f in b.check().by_code("H041")]
    assert len(messages) == 2, messages
    assert "attempt 2 [flow flow_2, key idem-a] retried attempt 1 [flow flow_1, no key]" in messages[0]
    assert "with a changed key (no key, then idem-a)" in messages[0]
    assert "with a changed key (its key idem-a, then idem-b) although tickets deduplicates on the " \
           "Idempotency-Key header" in messages[1]


def test_the_same_key_past_its_retention_is_h041_on_the_wires_clock(b):
    contract = b.context["destinations"]["tickets"]["contract"]
    b.context["destinations"]["tickets"]["contract"] = dict(
        contract, idempotency=dict(contract["idempotency"], retention_seconds=1))
    b.intent()
    b.request(lost=True, effect="tkt_1")
    b.tick(2.0)
    b.request(effect="tkt_2")
    [finding] = b.check().by_code("H041")
    assert "past its 1 s retention, so the destination no longer deduplicates it" in finding.message


def test_where_nothing_deduplicates_a_retry_is_judged_by_its_harm(b):
    """A blind retry on a webhook that did not duplicate (the first never reached it): no H041, no H040."""
    b.intent(kind="notify", destination="webhook")
    b.request(key=None, destination="webhook", reached=False, client_outcome="connection_closed")
    b.request(key=None, destination="webhook", effect="dlv_1")
    assert b.check().passed


def test_a_retried_put_converges_and_is_not_judged(b):
    b.intent(kind="notify", destination="webhook")
    b.request(key=None, destination="webhook", method="PUT", kind="notify", lost=True, status=500)
    b.request(key=None, destination="webhook", method="PUT", kind="notify")
    assert "H041" not in codes(b.check())


def test_two_effects_of_one_flow_the_network_delivered_twice_are_not_the_programs(b):
    b.intent()
    b.request(key=None, effect="tkt_1")
    row = dict(b.requests[0], seq=2, effect_ref="tkt_2")
    b.requests.append(row)
    b.effects.append(dict(b.effects[0], seq=2, effect_ref="tkt_2", request_seq=2))
    verdict = b.check()
    assert verdict.passed, render_text(verdict)
    assert verdict.intents[0].classification == "duplicate"  # the ledger's truth, judged or not


def test_a_503_with_retry_after_is_honoured_too(b):
    b.intent()
    b.request(reached=False, status=503, retry_after="2")
    b.tick(0.5)
    b.request(effect="tkt_1")
    [finding] = b.check().by_code("H042")
    assert "after the 503 on attempt 1" in finding.message and "asked to wait 2 s" in finding.message


def test_retry_after_is_not_asked_of_a_program_that_gave_up(b):
    b.intent()
    b.request(reached=False, status=429, retry_after="30")
    assert b.check().passed


def test_the_budget_is_the_documented_limit(b):
    b.intent()
    for _ in range(MAX_WIRE_ATTEMPTS):
        b.request(reached=False, status=503)
    assert b.check().passed
    b.request(reached=False, status=503)
    [finding] = b.check().by_code("H043")
    assert f"sent {MAX_WIRE_ATTEMPTS + 1} write attempts on the wire, past the budget of {MAX_WIRE_ATTEMPTS}" \
        in finding.message


def test_drift_is_the_destinations_reading_not_a_volatile_field_on_the_wire(b):
    """Two bodies on the wire, one payload to the destination (its volatile fields left out): no drift."""
    b.intent()
    b.request(lost=True, effect="tkt_1")
    b.request(effect="tkt_1", replay=True, payload=dict(PAYLOAD, sent_at="12:00:01"))
    b.requests[1]["payload_fingerprint"] = b.requests[0]["payload_fingerprint"]
    assert b.journal[0]["body_fingerprint"] != b.journal[1]["body_fingerprint"]
    assert b.check().passed


def test_an_effect_no_intent_accounts_for_is_h045_naming_why(b):
    b.intent()
    b.request(effect="tkt_1")
    b.request(key=None, destination="webhook", effect="ntf_1")
    verdict = b.check()
    [finding] = verdict.by_code("H045")
    assert finding.intent_id is None and finding.subject is None
    assert "committed effect ntf_1" in finding.message and "no intent asks for notify on webhook" in finding.message
    assert [u["kind"] for u in verdict.unattributed] == ["write", "effect"]
    assert "no intent's (black-box attribution" in render_text(verdict)


def test_expected_states_are_not_judged_but_said_so_and_effects_still_are(b):
    b.intent()
    b.request(effect="tkt_1")
    b.context["expect"] = {"states": {"int_1": ["succeeded"]}, "effects": {"tickets": 2}}
    verdict = b.check()
    assert verdict.not_judged[-1] == NOT_JUDGED_STATES
    [unmet] = expectation_findings(b.context["expect"], verdict, [], b.effects)
    assert "holds 1 distinct effect(s)" in unmet.message  # no "intent int_1 ended without an operation"


def test_a_retry_is_held_against_the_unknown_attempt_it_may_repeat_not_a_429_in_between(b):
    b.intent()
    b.request(key="idem-a", lost=True, status=500)
    b.request(key="idem-a", reached=False, status=429)
    b.request(key="idem-b", effect="tkt_1")
    [finding] = b.check().by_code("H041")
    assert finding.message.startswith("attempt 3 [flow flow_3, key idem-b] retried attempt 1 [flow flow_1, key "
                                      "idem-a], whose outcome the program could not know")
