"""The spine's rules judged from the agent log, the proxy journal and the ledger side by side."""

from __future__ import annotations

import json

import pytest

from harness.checker import RULES, RuleRegistryError, RunRule, check, rule
from harness.evidence import Evidence, load_evidence
from harness.report import render_text
from tests.common.evidence_builder import (
    PAYLOAD,
    EvidenceBuilder,
    codes,
    reference_dedup_retry_run,
    reference_lookup_run,
)


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence")


def test_reference_agent_lookup_story_passes(b):
    verdict = reference_lookup_run(b).check()
    assert verdict.passed, render_text(verdict)
    op = verdict.operation("op_1")
    assert op.classification == "healthy"
    assert op.effects == ["tkt_1"]
    assert op.attempts[0].wire["client_outcome"] == "connection_closed"
    assert "H005 lost-response-logged-unknown" in op.held


def test_reference_agent_dedup_retry_story_passes(b):
    verdict = reference_dedup_retry_run(b).check()
    assert verdict.passed, render_text(verdict)
    assert verdict.operation("op_1").classification == "healthy"


def test_new_key_per_attempt_fails_on_key_rules_with_a_plain_sentence(b):
    b.intent()
    b.operation(key=None)
    b.attempt("op_1", "att_01", "sent_no_response", key="idem-att_01", lost=True, effect="tkt_1")
    b.attempt("op_1", "att_02", "response_received", key="idem-att_02", effect="tkt_2",
              retry_of_attempt_id="att_01", retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_02"])
    verdict = b.check()
    assert {"H002", "H003", "H010", "H016"} <= codes(verdict), render_text(verdict)
    assert verdict.operation("op_1").classification == "duplicate"
    message = verdict.by_code("H002")[0].message
    assert message.startswith("idempotency key changed between att_01 (idem-att_01) and att_02 (idem-att_02) of op_1; "
                              "the destination committed 2 effect(s) (tkt_1, tkt_2) for 1 intent")
    assert "contains attempt id att_01" in verdict.by_code("H003")[0].message


def test_timeout_logged_failed_then_blind_retry_fails(b):
    b.intent()
    b.operation(key=None)
    b.attempt("op_1", "att_1", "execution_error", key=None, lost=True, effect="tkt_1", error="ReadTimeout")
    b.attempt("op_1", "att_2", "response_received", key=None, effect="tkt_2",
              retry_of_attempt_id="att_1", retry_reason="destination_5xx", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_2"])
    verdict = b.check()
    assert {"H002", "H005", "H010", "H016"} <= codes(verdict), render_text(verdict)
    assert "logged execution_error, not sent_no_response" in verdict.by_code("H005")[0].message


def test_agent_that_does_nothing_fails(b):
    b.intent()
    verdict = b.check()
    assert not verdict.passed
    assert codes(verdict) == {"H021"}
    assert "int_1" in verdict.findings[0].message


def test_flawless_looking_log_without_calling_the_destination_fails(b):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", wire=False)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    verdict = b.check()
    assert {"H018", "H015"} <= codes(verdict), render_text(verdict)
    assert "att_1" in verdict.by_code("H018")[0].message


def test_lost_response_logged_as_received_is_h005(b):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", lost=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    verdict = b.check()
    assert codes(verdict) == {"H005"}, render_text(verdict)


def test_lost_response_not_logged_at_all_is_h005_and_h017(b):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", log=False)
    b.observation("op_1", "obs_1", found=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["obs_1"])
    verdict = b.check()
    assert {"H005", "H017"} <= codes(verdict), render_text(verdict)
    assert "flow_1" in verdict.by_code("H017")[0].message


def test_new_operation_id_for_the_same_intent_is_h001(b):
    b.intent()
    b.operation("op_1")
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1")
    b.operation("op_2")  # a restart that forgot the pending operation
    b.attempt("op_2", "att_2", "response_received", key="idem-op_1", effect="tkt_1", replay=True)
    b.resolution("op_2", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    verdict = b.check()
    assert "H001" in codes(verdict), render_text(verdict)
    assert "intent int_1 got a second operation id op_2 after op_1" in verdict.by_code("H001")[0].message


def test_attempt_under_undeclared_operation_is_h001(b):
    b.intent()
    b.operation("op_1")
    b.attempt("op_x", "att_1", "response_received", effect="tkt_1")
    verdict = b.check()
    assert "never declared" in verdict.by_code("H001")[0].message


def test_superseding_operation_is_not_h001(b):
    b.intent()
    b.operation("op_1")
    b.attempt("op_1", "att_1", "not_sent", wire=False)
    b.resolution("op_1", "cancelled", evidence=["att_1"])
    changed = {**PAYLOAD, "title": "disk full on /var"}  # a changed payload: what superseding is for (H075)
    b.operation("op_2", key="idem-op_2", supersedes_operation_id="op_1")["intent"]["params"] = changed
    b.attempt("op_2", "att_2", "response_received", key="idem-op_2", effect="tkt_1", payload=changed)
    b.resolution("op_2", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


def test_resolution_citing_unknown_evidence_and_effect_is_h015(b):
    reference_lookup_run(b)
    b.events[-1]["evidence"] = ["att_1", "obs_9"]
    b.events[-1]["effect_refs"] = ["tkt_99"]
    verdict = b.check()
    messages = [f.message for f in verdict.by_code("H015")]
    assert any("obs_9" in m for m in messages) and any("tkt_99" in m and "tkt_1" in m for m in messages), messages


def test_closed_failed_while_ledger_holds_effect_is_h015_and_h006(b):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1")
    b.resolution("op_1", "failed", evidence=["att_1"])
    verdict = b.check()
    assert {"H006", "H015"} <= codes(verdict), render_text(verdict)


def test_two_effects_closed_duplicate_confirmed_with_correction_passes_h016(b):
    b.intent()
    b.operation(key=None, destination="webhook")
    b.attempt("op_1", "att_1", "sent_no_response", key=None, destination="webhook", lost=True, effect="dlv_a")
    b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved",
                         scope="retry")
    b.attempt("op_1", "att_2", "response_received", key=None, destination="webhook", effect="dlv_b",
              retry_of_attempt_id="att_1", retry_reason="operator_requested", attempt_budget_remaining=0)
    b.resolution("op_1", "duplicate_effect_confirmed", effects=["dlv_a", "dlv_b"], evidence=["att_2", "apr_1"],
                 correction_operation_id="op_2")
    b.operation("op_2", intent_id="int_1-correction", destination="webhook", key=None, parent_operation_id="op_1")
    b.event("approval", "op_2", approval_id="apr_2", approver="oncall", decision="approved", scope="compensate")
    b.resolution("op_2", "cancelled", evidence=["apr_2"])
    verdict = b.check()
    assert "H016" not in codes(verdict), render_text(verdict)
    assert verdict.operation("op_1").classification == "duplicate"


def test_two_effects_without_duplicate_resolution_is_h016(b):
    b.intent()
    b.operation(key=None, destination="webhook")
    b.attempt("op_1", "att_1", "response_received", key=None, destination="webhook", effect="dlv_a", status=200)
    # (an operator's call: a retry after a 200 labelled destination_5xx would be H024; without the approval
    # the model would name the re-execution of a call its 200 showed done, H060)
    b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", key=None, destination="webhook", effect="dlv_b", status=200,
              retry_of_attempt_id="att_1", retry_reason="operator_requested", attempt_budget_remaining=0)
    b.resolution("op_1", "succeeded", effects=["dlv_b"], evidence=["att_2"])
    verdict = b.check()
    assert codes(verdict) == {"H016"}, render_text(verdict)
    assert "2 effect(s) (dlv_a, dlv_b)" in verdict.by_code("H016")[0].message


def test_effect_no_operation_accounts_for_is_h023(b):
    reference_lookup_run(b)
    b.effects.append({"seq": 9, "destination": "tickets", "effect_ref": "tkt_stray", "kind": "ticket_created",
                      "operation_key": "other", "client_reference": None, "flow_id": "flow_zz"})
    verdict = b.check()
    assert codes(verdict) == {"H023"}
    assert "tkt_stray" in verdict.findings[0].message


def test_unresolved_operation_is_h021(b):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1")
    verdict = b.check()
    assert codes(verdict) == {"H021"}
    assert "never resolved" in verdict.findings[0].message


def test_correlation_prefers_traceparent_over_key_order(b):
    b.intent()
    b.operation()
    # The wire shows att_2's request first; only traceparent tells them apart (same key, same body).
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", log=False, traceparent="00-bb-02-01")
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, log=False, traceparent="00-aa-01-01", reached=False,
              client_outcome="connection_reset")
    b.event("attempt", "op_1", attempt_id="att_1", dispatch_state="sent_no_response", idempotency_key="idem-op_1",
            method="POST", path="/tickets", destination="tickets", traceparent="00-aa-01-01")
    b.event("attempt", "op_1", attempt_id="att_2", dispatch_state="response_received", idempotency_key="idem-op_1",
            method="POST", path="/tickets", destination="tickets", traceparent="00-bb-02-01", http_status=201,
            effect_refs=["tkt_1"], retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch",
            attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    verdict = b.check()
    op = verdict.operation("op_1")
    assert [a.wire["flow_id"] for a in op.attempts] == ["flow_2", "flow_1"]
    assert verdict.passed, render_text(verdict)


def test_report_names_attempts_wire_and_failed_checks(b):
    b.intent()
    b.operation(key=None)
    b.attempt("op_1", "att_01", "sent_no_response", key="idem-att_01", lost=True, effect="tkt_1")
    b.attempt("op_1", "att_02", "response_received", key="idem-att_02", effect="tkt_2",
              retry_of_attempt_id="att_01", retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_02"])
    text = render_text(b.check())
    assert "verdict: FAILED" in text
    assert "operation op_1 (intent int_1: create_ticket on tickets)" in text
    assert "attempt att_01: sent_no_response key=idem-att_01; wire: flow flow_1 forwarded=True upstream=201 " \
           "client=connection_closed fault=drop_response; destination: 201 committed tkt_1" in text
    assert "FAIL H002 idempotency-key-reused: idempotency key changed between att_01" in text
    assert "held: " in text and "H018 no-phantom-attempt" in text
    assert "resolved succeeded: tkt_2; evidence att_02" in text


def test_verdict_to_dict_is_json(b):
    verdict = reference_lookup_run(b).check()
    data = json.loads(json.dumps(verdict.to_dict()))
    assert data["passed"] is True
    assert data["operations"][0]["classification"] == "healthy"


def test_malformed_log_lines_are_h000_with_line_numbers_and_the_rest_is_judged(b):
    reference_lookup_run(b)
    b.raw_lines += ["{not json", json.dumps({"event": "attempt", "ts": 1.0, "session_id": "s", "operation_id": "op_1",
                                             "attempt_id": "att_9", "dispatch_state": "lost"})]
    verdict = b.check()
    messages = [f.message for f in verdict.by_code("H000")]
    assert len(messages) == 2
    assert messages[0].startswith("agent.ndjson:5: not JSON")
    assert messages[1].startswith("agent.ndjson:6: attempt event:") and "'dispatch_state'" in messages[1] \
        and "'lost'" in messages[1] and "sent_no_response" in messages[1]
    assert verdict.operation("op_1").classification == "healthy"


def test_an_empty_journal_is_still_the_wire_and_offline_is_the_callers_word(b):
    """The agent sent nothing the proxy saw: an empty journal, not a missing wire, so the wire rules judge."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", wire=False)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    evidence = load_evidence(b.write())
    assert evidence.journal == []
    assert "H018" in codes(check(evidence))  # logged as sent, never on the wire
    offline = check(evidence, offline=True)  # as the offline audit judges the log alone
    assert offline.passed, render_text(offline)
    assert offline.rules_run == [r.label for r in RULES.values() if not {"wire", "black_box"} & r.requires]


def test_missing_files_are_empty_sources(tmp_path):
    evidence = load_evidence(tmp_path)
    assert evidence.events == [] and evidence.journal == [] and evidence.effects == []
    assert check(evidence).passed  # nothing intended, nothing done


def test_duplicate_rule_code_or_name_is_a_clear_error():
    with pytest.raises(RuleRegistryError, match="H002 'x' .* clashes with H002 'idempotency-key-reused'"):
        rule("H002", "x")(lambda op: iter(()))
    with pytest.raises(RuleRegistryError, match="clashes with H016 'single-effect'"):
        rule("H099", "single-effect")(lambda op: iter(()))
    assert "H099" not in RULES


def test_a_rule_of_the_wrong_shape_for_its_scope_is_a_clear_error():
    with pytest.raises(RuleRegistryError, match="H098 'x' .*: a run rule must be a RunRule subclass"):
        rule("H098", "x", scope="run")(lambda run: iter(()))
    with pytest.raises(RuleRegistryError, match="H098 'x' .*: an operation rule must be a function"):
        rule("H098", "x")(type("NotAFunction", (RunRule,), {}))
    assert "H098" not in RULES


def test_every_rule_has_a_description():
    assert all(r.doc for r in RULES.values())
    assert isinstance(check(Evidence()).to_dict(), dict)


@pytest.mark.parametrize("name, text, expected", [
    ("ledger.json", "{oops", "ledger.json: not valid JSON"),
    ("ledger.json", '{"effects": {"a": 1}}', "ledger.json: key 'effects' must be a list of row objects"),
    ("context.json", '{"intents": {"i": 1}}', "context.json: key 'intents' must be a list, got dict"),
    ("context.json", '{"destinations": {"tickets": {"contract": {"service": "tickets", "lookup": "yes"}}}}',
     "context.json: destinations.tickets.contract: lookup: expected dict, got str 'yes'"),
])
def test_unusable_evidence_files_raise_evidence_error_naming_file_and_key(tmp_path, name, text, expected):
    from harness.errors import EvidenceError

    (tmp_path / name).write_text(text)
    with pytest.raises(EvidenceError, match=expected.replace("[", r"\[")):
        load_evidence(tmp_path)


def test_a_journal_line_that_is_no_object_leaves_the_run_incomplete_naming_it(tmp_path):
    """A junk journal line is no reason to lose the rest (issue 44): the folder is read, the run is INCOMPLETE,
    and the gap names the file and the line."""
    (tmp_path / "journal.ndjson").write_text('{"seq": 1}\n[1]\n')
    evidence = load_evidence(tmp_path)
    assert any("journal.ndjson:2: expected a JSON object, got list" in gap for gap in evidence.incomplete)


def test_missing_evidence_folder_is_a_clear_error(tmp_path):
    from harness.errors import EvidenceError

    with pytest.raises(EvidenceError, match="evidence folder .*nowhere does not exist"):
        load_evidence(tmp_path / "nowhere")


SSH_CONTRACT = {"service": "ssh", "idempotency": {"style": "none", "header": None, "body_field": None,
                                                  "retention_seconds": None, "scope": "global"},
                "lookup": None, "operations": {
                    "deploy_release": {"method": "EXEC", "command": "deploy {release} --operation-id {operation_id}",
                                       "dedup": "operation_marker"},
                    "restart_service": {"method": "EXEC", "command": "restart-service {service}"}}}


def ssh_run(b: EvidenceBuilder, kind: str, command: str, *, logged_twice: bool = True, on_wire: int = 2) -> None:
    """An SSH exec whose exit status was lost, run again: no proxy, only the ledger knows."""
    b.context["destinations"]["web1"] = {"spec": {"service": "ssh"}, "contract": SSH_CONTRACT}
    b.intent("int_1", kind, "web1", {})
    b.event("operation", "op_1", intent_id="int_1", state="open", idempotency_key="op_1",
            intent={"kind": kind, "destination": "web1", "params": {}})
    for seq in range(1, on_wire + 1):
        first = seq == 1
        b.requests.append({"seq": seq, "destination": "web1", "method": "EXEC", "path": command,
                           "idempotency_key": "op_1", "payload_fingerprint": "sha256:ab", "flow_id": None,
                           "traceparent": None, "status": 0,
                           "outcome": "committed" if first or kind == "restart_service" else "replayed",
                           "effect_ref": f"{kind}:1" if first or kind != "restart_service" else f"{kind}:2"})
        if first or kind == "restart_service":
            b.effects.append({"seq": seq, "destination": "web1", "effect_ref": b.requests[-1]["effect_ref"],
                              "kind": "ssh_exec", "operation_key": "op_1", "flow_id": None, "request_seq": seq})
    common = dict(destination="web1", method="EXEC", path=command, idempotency_key="op_1",
                  request_fingerprint="sha256:ab")
    b.event("attempt", "op_1", attempt_id="att_1", dispatch_state="sent_no_response", attempt_budget_remaining=2,
            **common)
    if logged_twice:
        b.event("attempt", "op_1", attempt_id="att_2", dispatch_state="response_received", retry_of_attempt_id="att_1",
                retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1,
                effect_refs=[f"{kind}:1"], **common)
    b.resolution("op_1", "succeeded", effects=[f"{kind}:1"], evidence=["att_2" if logged_twice else "att_1"])


def test_ssh_rerun_with_operation_marker_is_matched_through_the_ledger_and_passes(b):
    ssh_run(b, "deploy_release", "deploy r42 --operation-id op_1")
    verdict = b.check()
    assert verdict.passed, render_text(verdict)
    assert ("not proxied; the destination received it (ledger request 2): replayed deploy_release:1"
            in render_text(verdict))


def test_ssh_rerun_without_dedup_is_h010_and_h016(b):
    ssh_run(b, "restart_service", "restart-service api")
    verdict = b.check()
    assert {"H010", "H016"} <= codes(verdict), render_text(verdict)
    assert "on web1, which does not deduplicate" in verdict.by_code("H010")[0].message


def test_ssh_exec_the_log_omits_is_h017(b):
    ssh_run(b, "deploy_release", "deploy r42 --operation-id op_1", logged_twice=False)
    verdict = b.check()
    assert "H017" in codes(verdict), render_text(verdict)
    assert "ledger:2" in verdict.by_code("H017")[0].message


@pytest.mark.parametrize("shared", [False, True], ids=["own-traceparent", "one-traceparent-for-the-operation"])
def test_a_traceparent_on_other_requests_pairs_the_attempt_with_its_own_route(tmp_path, shared):
    """An agent may send one traceparent on every request of an operation (a lookup before the write, an MCP
    session's initialize before its tools/call): the attempt is paired with the flow of its own method and path,
    and the verdict is the one the same story gets without the shared header."""
    verdicts = {}
    for trace in ("00-aa-01-01", None):
        b = EvidenceBuilder(tmp_path / f"ev-{trace}")
        b.intent()
        b.operation()
        b.observation("op_1", "obs_0", found=False)  # a lookup before the first write: GET /tickets
        b.journal[-1]["traceparent"] = trace if shared else None
        b.attempt("op_1", "att_1", "response_received", effect="tkt_1", traceparent=trace)
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
        verdicts[trace] = b.check()
    assert verdicts["00-aa-01-01"].operation("op_1").attempts[0].wire["flow_id"] == "flow_2"  # the POST, not the GET
    assert codes(verdicts["00-aa-01-01"]) == codes(verdicts[None]), render_text(verdicts["00-aa-01-01"])
