"""The offline audit: the article's four operations, our own event format, malformed lines, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from harness.audit.output import json_text
from harness.cli import run_audit
from harness.events import plain_json
from harness.recorder import Recorder
from tests.common.logs import late_observation_log

ARTICLE = Path(__file__).parent / "fixtures" / "article_four_operations.ndjson"


def audit(path: Path, fmt: str = "json", **kwargs) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run_audit(path, format=fmt, out=out, err=err, **kwargs)
    return status, out.getvalue(), err.getvalue()


def test_article_four_operations_are_classified_as_the_article_says():
    status, out, _ = audit(ARTICLE)
    data = json.loads(out)
    classes = {o["operation_id"]: o["classification"] for o in data["operations"]}
    assert classes == {"op_ticket_42": "healthy", "op_webhook_77": "duplicate", "op_vm_5": "key_conflict",
                       "op_email_3": "uncertain"}
    assert status == 1
    ticket = next(o for o in data["operations"] if o["operation_id"] == "op_ticket_42")
    assert ticket["effects"] == ["ticket_908"] and ticket["findings"] == []  # two lines, one effect
    vm = next(o for o in data["operations"] if o["operation_id"] == "op_vm_5")
    assert "H004" in {f["code"] for f in vm["findings"]}
    assert data["summary"]["events"] == 12


def test_article_text_output_names_the_problem_operations(tmp_path):
    status, out, _ = audit(ARTICLE, "text")
    assert status == 1
    assert "operation op_webhook_77" in out and "(more than one effect: a duplicate)" in out
    assert "operation op_ticket_42" not in out  # healthy operations stay quiet in text
    assert "4 operations (classified by their effects: 1 duplicate, 1 healthy, 1 key_conflict, 1 uncertain)" in out


def test_healthy_ticket_alone_exits_zero(tmp_path):
    log = tmp_path / "ticket.ndjson"
    log.write_text("".join(line for line in ARTICLE.read_text().splitlines(keepends=True) if "ticket_42" in line))
    status, out, _ = audit(log)
    assert status == 0, out


def write_reference_log(path: Path) -> None:
    with Recorder(path, session_id="ses_1") as rec:
        rec.operation("op_1", intent_id="int_1", idempotency_key="idem-op_1",
                      intent={"kind": "create_ticket", "destination": "tickets", "params": {}})
        rec.attempt("op_1", "att_1", "sent_no_response", idempotency_key="idem-op_1", method="POST",
                    path="/tickets", request_fingerprint="sha256:aa", attempt_budget_remaining=2)
        rec.observation("op_1", "obs_1", source="lookup", found=True, effect_refs=["tkt_1"])
        rec.resolution("op_1", "succeeded", effect_refs=["tkt_1"], evidence=["att_1", "obs_1"])


def test_our_event_log_from_the_recorder_audits_healthy(tmp_path):
    log = tmp_path / "agent.ndjson"
    write_reference_log(log)
    status, out, _ = audit(log)
    assert status == 0, out
    assert json.loads(out)["operations"][0]["classification"] == "healthy"


def test_malformed_lines_are_reported_with_file_and_line_and_the_rest_is_audited(tmp_path):
    log = tmp_path / "agent.ndjson"
    write_reference_log(log)
    lines = log.read_text().splitlines()
    lines.insert(2, "{oops")
    lines.insert(4, json.dumps({"event": "attempt", "ts": 1, "session_id": "s", "operation_id": "op_1"}))
    log.write_text("\n".join(lines) + "\n")
    status, out, _ = audit(log, "text")
    assert status == 1
    assert f"{log}:3: not JSON" in out
    assert f"{log}:5: attempt event: field 'attempt_id' missing" in out
    assert "2 malformed lines" in out and "1 operation (classified by their effects: 1 healthy)" in out


def test_unreadable_inputs_exit_2_with_a_message_naming_the_file(tmp_path):
    status, _, err = audit(tmp_path / "missing.ndjson")
    assert status == 2 and "missing.ndjson" in err and "No such file" in err
    status, _, err = audit(tmp_path)
    assert status == 2 and "is a folder" in err
    garbage = tmp_path / "garbage.ndjson"
    garbage.write_text("not json\n[1, 2]\n")
    status, out, err = audit(garbage, "text")
    assert status == 2 and "holds no usable audit event (2 malformed line(s))" in err
    assert f"{garbage}:1: not JSON" in out and f"{garbage}:2: expected a JSON object, got list" in out
    status, _, err = audit(ARTICLE, "yaml")
    assert status == 2 and "'yaml' is not known; valid: json, text" in err


def test_secret_in_an_offline_log_is_h019_without_echoing_it(tmp_path):
    log = tmp_path / "agent.ndjson"
    write_reference_log(log)
    with Recorder(log, session_id="ses_1") as rec:
        rec.observation("op_1", "obs_2", source="operator", note="curl -H 'Authorization: Bearer sk_live_abcdef123456'")
    status, out, _ = audit(log)
    finding = json.loads(out)["operations"][0]["findings"][0]
    assert finding["code"] == "H019" and "an Authorization header" in finding["message"]
    assert "sk_live_abcdef123456" not in out
    assert status == 1


def test_a_secret_is_found_in_any_case_and_on_a_malformed_line_as_check_finds_it(tmp_path):
    log = tmp_path / "agent.ndjson"
    write_reference_log(log)
    with log.open("a") as handle:  # cut short: not JSON, and it holds a credential
        handle.write('{"event": "attempt", "headers": {"AuThOrIzAtIoN": "BeArEr sk_live_abcdef123456"}\n')
    status, out, _ = audit(log)
    findings = json.loads(out)["findings"]
    assert [(f["code"], f["operation_id"]) for f in findings] == [("H000", None), ("H019", None)], findings
    assert findings[1]["message"] == (f"{log}:5 holds an Authorization header, a bearer token; log a reference and a "
                                      f"fingerprint instead")
    assert "sk_live_abcdef123456" not in out and status == 1


def test_a_worker_operation_is_judged_beside_its_owner_at_the_end_of_the_file(tmp_path):
    """At the end of the file every open operation is judged with all the others as peers, as check() has
    them: the owner, judged first, is still there when its worker is judged (H020)."""
    log = tmp_path / "agent.ndjson"
    with Recorder(log, session_id="ses_1") as rec:
        rec.operation("op_1", intent_id="int_1")
        rec.attempt("op_1", "att_1", "response_received", effect_refs=["tkt_1"])
        rec.resolution("op_1", "succeeded", effect_refs=["tkt_1"], evidence=["att_1"])
        rec.operation("op_w", intent_id="int_1", parent_operation_id="op_1", owner="worker-1")
        rec.resolution("op_w", "cancelled", evidence=[])
    status, out, _ = audit(log)
    worker = json.loads(out)["operations"][1]
    assert "H020" in {f["code"] for f in worker["findings"]}, worker["findings"]


def test_streaming_judges_early_and_reports_a_too_late_event(tmp_path):
    log = late_observation_log(tmp_path / "agent.ndjson", operations=5)
    status, out, _ = audit(log, window=2, engine="stream")
    data = json.loads(out)
    assert [o["operation_id"] for o in data["operations"]][:2] == ["op_0", "op_1"]
    assert "comes after that operation was resolved and 2 more were" in data["findings"][0]["message"]
    assert status == 1
    status, out, _ = audit(log, window=100, engine="stream")  # a wide enough window sees it in place
    assert status == 0, out


def test_the_embedded_engine_judges_a_late_line_in_place(tmp_path):
    """The triaged engines group each operation's lines whatever their distance: no window to fall out of."""
    log = late_observation_log(tmp_path / "agent.ndjson", operations=5)
    status, out, _ = audit(log, window=2)
    assert status == 0 and json.loads(out)["findings"] == [], out


@pytest.mark.parametrize("mutation, code", [
    (lambda r: r.update(retry_reason="felt_like_it"), "H008"),
    (lambda r: r.pop("retry_of_attempt_id"), "H008"),
    (lambda r: r.pop("attempt_budget_remaining"), "H009"),
])
def test_offline_audit_runs_the_log_only_rules(tmp_path, mutation, code):
    records = [
        {"event": "operation", "ts": 1.0, "session_id": "s", "operation_id": "op_1", "intent_id": "i"},
        {"event": "attempt", "ts": 2.0, "session_id": "s", "operation_id": "op_1", "attempt_id": "a1",
         "dispatch_state": "response_received", "http_status": 503, "idempotency_key": "k"},
        {"event": "attempt", "ts": 3.0, "session_id": "s", "operation_id": "op_1", "attempt_id": "a2",
         "dispatch_state": "response_received", "http_status": 201, "idempotency_key": "k", "effect_refs": ["t"],
         "retry_of_attempt_id": "a1", "retry_reason": "destination_5xx", "attempt_budget_remaining": 1},
        {"event": "resolution", "ts": 4.0, "session_id": "s", "operation_id": "op_1", "state": "succeeded",
         "effect_refs": ["t"], "evidence": ["a2"]},
    ]
    log = tmp_path / "agent.ndjson"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert audit(log)[0] == 0
    mutation(records[2])
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    status, out, _ = audit(log)
    assert status == 1
    assert code in {f["code"] for f in json.loads(out)["operations"][0]["findings"]}


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=3), max_leaves=10)


@settings(max_examples=500, deadline=None)
@given(intent=json_values)
def test_operation_output_is_pydantic_cores_json_byte_for_byte(intent):
    """The audit writes verdicts with orjson; what pydantic_core's encoder wrote before is the reference.
    Vouched lines hold no float (harness.events.plain_json): orjson writes those; any other line makes its
    operation careful, and pydantic_core writes it."""
    data = {"operation_id": "op_1", "intent": intent, "effects": ["t1"], "attempts": [{"line": 3, "wire": None}]}
    assert json_text(data, careful=True) == to_json(data).decode()
    if plain_json(intent):
        assert json_text(data) == to_json(data).decode()


def test_numbers_orjson_cannot_write_come_out_as_before(tmp_path):
    """Infinity (1e999) or a 70-bit integer in an intent: written as pydantic_core did."""
    log = tmp_path / "agent.ndjson"
    log.write_text('{"event": "operation", "ts": 1, "session_id": "s", "operation_id": "op_1", '
                   '"intent": {"x": 1e999}}\n'
                   '{"event": "operation", "ts": 1, "session_id": "s", "operation_id": "op_2", '
                   '"intent": {"x": 1180591620717411303424}}\n')
    status, out, _ = audit(log)
    assert '"intent":{"x":Infinity}' in out and '"intent":{"x":1180591620717411303424}' in out
    assert status == 1


def test_the_article_ledger_is_judged_once_an_effect_is_logged_and_a_late_retry_is_reported(tmp_path):
    """The article's format has no resolution: an operation's story is told once an effect of it is logged, so
    memory follows open operations there too; a retry past the window is a finding, never silently lost."""
    def line(kind: str, op: str, **fields) -> str:
        base = ({"type": "attempt", "operationId": op, "attemptId": f"{op}-a1", "idempotencyKey": f"k-{op}",
                 "payloadHash": "p", "result": "success"} if kind == "attempt"
                else {"type": "effect", "operationId": op, "effectRef": f"t-{op}"})
        return json.dumps({**base, "observedAt": "2026-03-02T10:00:00Z", **fields})

    lines = []
    for n in range(5):
        lines += [line("attempt", f"op_{n}"), line("effect", f"op_{n}")]
    lines.append(line("attempt", "op_0", attemptId="op_0-a2"))  # op_0's retry, three effects later
    log = tmp_path / "ledger.ndjson"
    log.write_text("\n".join(lines) + "\n")
    status, out, _ = audit(log, window=2, engine="stream")
    data = json.loads(out)
    assert [o["operation_id"] for o in data["operations"]][:2] == ["op_0", "op_1"]  # judged before the end
    assert status == 1 and "comes after that operation had its effect logged and 2 more were" in \
        data["findings"][0]["message"]
    status, out, _ = audit(log, window=100, engine="stream")  # in the window, the retry is judged in place
    assert status == 0, out
