"""The checker on MCP runs (hand-built evidence, tests/checker/mcp_evidence.py): JSON-RPC flows are routed
as (rpc.method, rpc.tool), protocol messages and tools without effect are never attempts, and the rules judge
a tool call exactly as they judge an HTTP write; H050 names an annotation the destination contradicted."""

from __future__ import annotations

import pytest

from harness.report import render_text
from tests.checker.mcp_evidence import MCPStory, reference_mcp_lookup_run
from tests.common.evidence_builder import EvidenceBuilder, codes


@pytest.fixture
def b(tmp_path) -> EvidenceBuilder:
    return EvidenceBuilder(tmp_path / "evidence")


def test_the_reference_story_passes_and_each_attempt_is_matched_to_its_tool_call(b):
    reference_mcp_lookup_run(b)
    verdict = b.check()
    assert verdict.passed, render_text(verdict)
    [attempt] = verdict.operation("op_1").attempts
    assert attempt.wire is not None and attempt.wire["flow_id"] == "flow_4"  # not initialize, not tools/list
    assert attempt.destination_saw[0]["effect_ref"] == "ord_1"


def test_the_reference_story_passes_black_box_and_protocol_is_not_attributed(b):
    reference_mcp_lookup_run(b).b.black_box()
    verdict = b.check()
    assert verdict.passed and not verdict.unattributed, render_text(verdict)
    assert [a["flow_id"] for a in verdict.intents[0].attempts] == ["flow_4"]


def test_protocol_messages_and_a_tool_without_effect_are_never_unlogged_attempts(b):
    s = reference_mcp_lookup_run(b)
    s.flow("tools/call", tool="ping", arguments={})  # a tool without effect, never logged
    s.flow("tools/list", lost=True)  # even a lost protocol answer is nobody's attempt
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


def test_an_unlogged_call_of_an_effect_tool_is_h017(b):
    s = reference_mcp_lookup_run(b)
    s.call("att_x", "response_received", effect="ord_2", log=False)
    verdict = b.check()
    assert {"H016", "H017"} <= codes(verdict), render_text(verdict)  # the order is op_1's by its client reference
    assert "tools/call create_order to orders" in verdict.by_code("H017")[0].message


def test_a_lookup_tool_call_logged_as_an_attempt_is_h013(b):
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_budget_remaining=2)
    s.call("att_2", "response_received", tool="find_orders", arguments={"client_reference": "op_1"},
           retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    s.resolve("succeeded", ["ord_1"], ["att_1", "att_2"])
    verdict = b.check()
    assert "H013" in codes(verdict), render_text(verdict)


@pytest.mark.parametrize("same_key, flagged", [(True, False), (False, True)])
def test_a_retry_after_a_lost_result_needs_the_same_key_on_a_deduplicating_tool(b, same_key, flagged):
    """idempotency: argument (contract style client_token, body_field idempotency_key): the key argument reused
    is justification enough, as for an HTTP retry; a fresh one is H002/H010 and a second order."""
    s = MCPStory(b, idempotency="argument", annotations={})
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_budget_remaining=2)
    retry = s.arguments() if same_key else {**s.arguments(), "idempotency_key": "idem-fresh"}
    s.call("att_2", "response_received", effect="ord_1" if same_key else "ord_2", replay=same_key, arguments=retry,
           retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    if not same_key:
        b.events[-1]["idempotency_key"] = "idem-fresh"
    s.resolve("succeeded", ["ord_1" if same_key else "ord_2"], ["att_2"])
    verdict = b.check()
    assert verdict.passed is not flagged, render_text(verdict)
    if flagged:
        assert {"H002", "H010", "H016"} <= codes(verdict)
        assert "H050" not in codes(verdict)  # no annotation was published: nothing to contradict


def test_an_error_result_after_the_commit_is_an_unknown_result(b):
    """tool_error_after_commit: a retry without a lookup is H010, naming the error result; closing succeeded
    on the error result itself is H025; the hint the tool publishes is H050's."""
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "response_received", effect="ord_1", is_error=True, attempt_budget_remaining=2)
    s.call("att_2", "response_received", effect="ord_2", retry_of_attempt_id="att_1", retry_reason="destination_5xx",
           attempt_budget_remaining=1)
    s.resolve("succeeded", ["ord_1"], ["att_1"])
    verdict = b.check()
    assert {"H010", "H016", "H025", "H050"} <= codes(verdict), render_text(verdict)
    assert "H024" not in codes(verdict)  # an error result is the tool's 5xx: the reason matches the wire
    assert "whose answer was an MCP error result" in verdict.by_code("H010")[0].message
    assert "got an MCP error result" in verdict.by_code("H025")[0].message
    assert "after an error result" in verdict.by_code("H050")[0].message


def test_an_error_result_reconciled_by_the_lookup_tool_passes(b):
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "response_received", effect="ord_1", is_error=True, attempt_budget_remaining=2)
    s.lookup("obs_1", ["ord_1"])
    s.resolve("succeeded", ["ord_1"], ["obs_1"])
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


def test_a_failed_closure_on_an_error_result_without_a_lookup_is_h006(b):
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "response_received", effect="ord_1", is_error=True, attempt_budget_remaining=2)
    s.resolve("failed", [], ["att_1"])
    verdict = b.check()
    assert "H006" in codes(verdict), render_text(verdict)


def test_h050_names_a_read_only_hint_contradicted(b):
    s = MCPStory(b, annotations={"readOnlyHint": True})
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_budget_remaining=2)
    s.call("att_2", "response_received", effect="ord_2", retry_of_attempt_id="att_1",
           retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    s.resolve("succeeded", ["ord_2"], ["att_2"])
    [finding] = b.check().by_code("H050")
    assert finding.message.startswith("tool create_order publishes readOnlyHint: true but the destination committed "
                                      "2 effects (ord_1, ord_2) for operation op_1 (ledger seq 1, 2)")
    assert {"source": "ledger", "table": "effects"}.items() <= finding.evidence[-1].items()


def test_h050_holds_when_the_destination_honoured_the_hint(b):
    """idempotentHint: true on a tool that does deduplicate on its key argument: the retry replayed, one order;
    no contradiction, and the key (not the hint) justified the retry."""
    s = MCPStory(b, idempotency="argument")
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_budget_remaining=2)
    s.call("att_2", "response_received", effect="ord_1", replay=True, retry_of_attempt_id="att_1",
           retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    s.resolve("succeeded", ["ord_1"], ["att_2"])
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


def test_a_blind_tool_retry_is_h041_judged_black_box(b):
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, log=False)
    s.call("att_2", "response_received", effect="ord_2", log=False)
    verdict = b.black_box().check()
    assert {"H040", "H041"} <= codes(verdict), render_text(verdict)


@pytest.mark.parametrize("logged, flagged", [("op_1", False), ("op_other", True)])
def test_a_natural_key_is_held_against_the_destination_s_reading(b, logged, flagged):
    """idempotency: natural_key: the key is the client_reference argument, which the proxy does not know as a
    key; H002 holds the logged key against the ledger's row of the call instead."""
    reference_mcp_lookup_run(b, idempotency="natural_key")
    for event in b.events:
        if event.get("idempotency_key"):
            event["idempotency_key"] = logged
    verdict = b.check()
    assert ("H002" in codes(verdict)) is flagged, render_text(verdict)
    if flagged:
        assert "logged key op_other but the wire carried 'op_1'" in verdict.by_code("H002")[0].message
