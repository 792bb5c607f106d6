"""The claims table (harness/checker/claims.py): its rows name registered rules, docs/contract.md shows it as the
module renders it, a mode without the counterpart says "not exercised", and each tolerance is the one the rule
applies (the edge on either side of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checker import RULES, check
from harness.checker.claims import (
    BLACK_BOX_RUN,
    CLAIMS,
    CONCURRENT_FIELD,
    GAVE_UP_AFTER_SECONDS,
    OFFLINE_AUDIT,
    claims_markdown,
)
from harness.evidence import load_evidence
from harness.report import render_text
from tests.common.evidence_builder import EvidenceBuilder, codes, reference_dedup_retry_run, reference_lookup_run


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence")


def test_every_claim_names_registered_rules_once_and_a_flaw():
    names = [c.name for c in CLAIMS]
    assert len(names) == len(set(names))
    for claim in CLAIMS:
        assert claim.rules and set(claim.rules) <= set(RULES), claim.name
        assert len(claim.rules) == len(set(claim.rules)) and claim.flaw and claim.tolerance, claim.name


def test_docs_contract_shows_the_claims_as_the_module_renders_them():
    doc = (Path(__file__).parents[2] / "docs" / "contract.md").read_text()
    block = doc.split("<!-- claims:start", 1)[1].split("-->", 1)[1].split("<!-- claims:end -->", 1)[0]
    assert block.strip("\n") == claims_markdown(), "run: python -m harness.doc_tables --write"


def test_a_claim_whose_counterpart_a_mode_lacks_is_not_exercised_there():
    by_name = {c.name: c.modes() for c in CLAIMS}
    assert by_name["clock"][OFFLINE_AUDIT] == "not exercised (no wire)"
    assert by_name["clock"][BLACK_BOX_RUN] == "not exercised (no log)"
    assert by_name["status and effect refs"][OFFLINE_AUDIT].startswith("not exercised (no wire); the log against")
    assert by_name["one decider"][OFFLINE_AUDIT] == "H020"


def test_the_offline_audit_lists_the_wire_claims_as_not_exercised_never_held(b):
    reference_lookup_run(b)
    verdict = check(load_evidence(b.write()), offline=True)
    for code in ("H028", "H070", "H071", "H072", "H073", "H074", "H075"):
        assert verdict.checks[RULES[code].label] == "not exercised", code


def test_a_black_box_run_lists_the_log_claims_as_not_exercised(b):
    b.black_box().intent()
    b.request(effect="tkt_1")
    verdict = b.check()
    assert verdict.passed, render_text(verdict)
    for code in ("H020", "H028", "H070", "H073"):
        assert verdict.checks[RULES[code].label] == "not exercised", code


@pytest.mark.parametrize("took, flagged", [(GAVE_UP_AFTER_SECONDS - 0.05, True), (GAVE_UP_AFTER_SECONDS + 0.05, False)])
def test_h028_a_lost_answer_stamped_before_it_is_excused_only_after_a_client_could_have_timed_out(b, took, flagged):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", effect="tkt_1", attempt_budget_remaining=2)  # the client got 201
    b.observation("op_1", "obs_1", found=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["obs_1"])
    b.journal[0]["ts_done"] = b.journal[0]["ts_request"] + took
    b.events[1]["ts"] = b.journal[0]["ts_request"]  # stamped when it was sent
    assert ("H028" in codes(b.check())) is flagged


def _hedged(b, *, after: float, answered: bool = True, **second) -> None:
    reference_dedup_retry_run(b)
    first, retry = b.journal
    retry["ts_request"] = first["ts_request"] + after
    first["ts_done"] = retry["ts_request"] + 0.5
    if not answered:
        first["fault"] = "hold_response"
    b.events[2].update(second)


def test_h071_a_hedged_copy_the_log_declares_concurrent_holds(b):
    _hedged(b, after=0.05, **{CONCURRENT_FIELD: "att_1"})
    assert "H071" not in codes(b.check())


def test_h071_a_retry_after_the_client_timed_out_on_a_held_flow_holds(b):
    _hedged(b, after=GAVE_UP_AFTER_SECONDS + 0.3, answered=False)
    assert "H071" not in codes(b.check())


def test_h071_names_the_retry_and_the_flow_still_in_flight(b):
    _hedged(b, after=0.05)
    [finding] = b.check().by_code("H071")
    assert "att_2 of op_1 reached the proxy" in finding.message and "while att_1 was still in flight" in finding.message


def test_h070_a_clock_in_milliseconds_is_off_the_runs(b):
    reference_lookup_run(b)
    b.context["agent"]["runs"] = [{"command": "t", "exit_status": 0, "timed_out": False, "killed_by_harness": False,
                                   "seconds": 1.0, "started_at": b.events[0]["ts"] - 0.5,
                                   "ended_at": b.events[-1]["ts"] + 0.5}]
    assert "H070" not in codes(b.check())
    b.events[2]["ts"] = b.events[2]["ts"] * 1000
    [finding] = b.check().by_code("H070")
    assert "the observation of op_1 is stamped" in finding.message and "after the agent's runs" in finding.message


def test_h020_a_restarted_owner_closing_again_is_one_decider_a_worker_and_its_owner_two(b):
    reference_lookup_run(b)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["obs_1"])
    b.events[-1]["session_id"] = "ses_2"  # the owner restarted: still the owner
    assert "H020" not in codes(b.check())
    b.events[1]["session_id"] = b.events[-2]["session_id"] = "ses_w"
    b.events[1]["worker"] = "wrk_1"  # the worker attempted and closed; the owner closed too
    assert "H020" in codes(b.check())


def test_h073_a_key_in_mcp_meta_is_the_flaw_and_the_annotation_is_not_blamed(b):
    """The key went in params._meta (the proxy reads it there, the tool reads only its key argument): the retry
    left a second order. H073 names the key; H050 does not blame the tool's idempotentHint for it."""
    from tests.checker.mcp_evidence import ARGS, MCPStory

    s = MCPStory(b, "argument", annotations={"idempotentHint": True})
    bare = {**ARGS, "client_reference": s.op}  # no key argument
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, arguments=bare, attempt_budget_remaining=2)
    s.connect()
    s.call("att_2", "response_received", effect="ord_2", arguments=bare, retry_of_attempt_id="att_1",
           retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    for entry in b.journal:
        if (entry.get("rpc") or {}).get("tool") == "create_order":
            entry["idempotency_key"] = s.key  # what the proxy read from params._meta
    s.resolve("succeeded", ["ord_2"], ["att_2"])
    found = codes(b.check())
    assert "H073" in found and "H050" not in found, found


def test_h070_an_attempt_stamped_before_a_slow_client_sent_it_holds_one_stamped_long_before_does_not(b):
    """A correct agent stamps its attempt, then imports its SDK or opens a session: on a loaded machine its request
    reaches the proxy seconds later (3.2 s measured). A stamp further ahead than ATTEMPT_LEAD_SECONDS is not the
    attempt's."""
    from harness.checker.claims import ATTEMPT_LEAD_SECONDS

    reference_lookup_run(b)
    sent = b.journal[0]["ts_request"]
    b.events[1]["ts"] = sent - 3.2
    assert "H070" not in codes(b.check())
    b.events[1]["ts"] = sent - ATTEMPT_LEAD_SECONDS - 1
    [finding] = b.check().by_code("H070")
    assert "before its request reached the proxy" in finding.message
