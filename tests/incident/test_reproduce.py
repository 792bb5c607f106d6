"""`python -m harness reproduce` on the incidents an on-call engineer has: an audit log alone, the article's
effect-ledger NDJSON, one operation of a run; secrets never reach the scenario; bad input is exit 2 naming the
file and what was expected. (Every wrong agent's evidence folder: test_round_trip.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.scenario import load

WRONG = "python -m harness.agents.wrong.new_key_per_attempt"


def reproduce(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "reproduce", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def codes(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in result.verdict.findings}


def test_an_audit_log_alone_becomes_a_generic_destination_that_fails_the_agent_again(tmp_path: Path) -> None:
    """A production log: no journal, no ledger, no scenario. What it says of each attempt (dispatch state,
    status, key, method and path) is enough to put the agent back where it was."""
    run = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=WRONG, evidence_root=tmp_path / "prod")
    log = tmp_path / "prod-events.ndjson"
    log.write_bytes(EvidenceLayout(run.evidence_dir).agent_log.read_bytes())
    done = reproduce(log, "-o", tmp_path / "incident.yaml")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "incident.yaml").read_text()
    assert "# Choices the incident could not settle" in text  # what a log cannot say is said, not guessed silently
    assert "drop_response_after_commit, the worst case" in text
    scenario = load(tmp_path / "incident.yaml")
    (name, spec), = scenario.destinations.items()
    assert name == "tickets" and spec.api is not None and spec.api.idempotency.style == "stripe"
    assert [i.intent_id for i in scenario.intents] == ["printer-on-fire"]
    assert scenario.intents[0].kind == "create_ticket"
    again = run_scenario(scenario, agent=WRONG, evidence_root=tmp_path / "again")
    assert {"H002", "H016"} <= codes(again)
    assert run_scenario(scenario, evidence_root=tmp_path / "reference").passed


def test_the_articles_effect_ledger_becomes_a_scenario(tmp_path: Path) -> None:
    log = tmp_path / "ledger.ndjson"
    lines = [
        {"type": "attempt", "operationId": "op-refund-77", "attemptId": "a1", "idempotencyKey": "k1",
         "payloadHash": "h1", "result": "timeout", "observedAt": "2026-11-30T10:00:00Z"},
        {"type": "attempt", "operationId": "op-refund-77", "attemptId": "a2", "idempotencyKey": "k2",
         "payloadHash": "h1", "result": "ok", "observedAt": "2026-11-30T10:00:03Z"},
        {"type": "effect", "operationId": "op-refund-77", "effectRef": "re_1", "observedAt": "2026-11-30T10:00:01Z"},
        {"type": "effect", "operationId": "op-refund-77", "effectRef": "re_2", "observedAt": "2026-11-30T10:00:03Z"},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = reproduce(log, "-o", tmp_path / "refund.yaml")
    assert done.returncode == 0, done.stderr
    scenario = load(tmp_path / "refund.yaml")
    assert [i.intent_id for i in scenario.intents] == ["op-refund-77"]
    assert [r.action for r in scenario.faults] == ["hold_response"]  # the timeout, held past the client's wait
    assert "op-refund-77" in scenario.description
    assert run_scenario(scenario, evidence_root=tmp_path / "reference").passed


def test_one_operation_of_a_run_with_two(tmp_path: Path) -> None:
    run = run_scenario(load(catalogue_dir() / "two_intents_one_run.yaml"), agent=WRONG, evidence_root=tmp_path)
    records = [json.loads(line) for line in EvidenceLayout(run.evidence_dir).agent_log.read_text().splitlines()]
    operations = {r["operation_id"]: r.get("intent_id") for r in records if r["event"] == "operation"}
    assert len(operations) == 2
    op_id, intent_id = sorted(operations.items())[0]
    done = reproduce(run.evidence_dir, "-o", tmp_path / "one.yaml", "--operation", op_id)
    assert done.returncode == 0, done.stderr
    scenario = load(tmp_path / "one.yaml")
    assert [i.intent_id for i in scenario.intents] == [intent_id]
    assert op_id in scenario.description

    log = EvidenceLayout(run.evidence_dir).agent_log  # the log alone: the same operation, inferred
    done = reproduce(log, "-o", tmp_path / "one-from-log.yaml", "--operation", op_id)
    assert done.returncode == 0, done.stderr
    assert [i.intent_id for i in load(tmp_path / "one-from-log.yaml").intents] == [intent_id]

    unknown = reproduce(run.evidence_dir, "-o", tmp_path / "x.yaml", "--operation", "op_nope")
    assert unknown.returncode == 2
    assert "no operation 'op_nope' in the incident; its operations: " in unknown.stderr and op_id in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_secrets_in_the_incident_never_reach_the_scenario(tmp_path: Path) -> None:
    canaries = {"api_key": "sk_live_CANARY4c7d1e", "password": "hunter2-CANARY", "note": "Bearer CANARYtoken9"}
    log = tmp_path / "events.ndjson"
    intent = {"kind": "create_payment", "destination": "payments", "params": {"amount": 5, **canaries}}
    log.write_text("\n".join(json.dumps(r) for r in [
        {"event": "operation", "ts": 1.0, "session_id": "s", "operation_id": "op_1", "intent_id": "pay-1",
         "intent": intent},
        {"event": "attempt", "ts": 2.0, "session_id": "s", "operation_id": "op_1", "attempt_id": "a1",
         "destination": "payments", "method": "POST", "path": "/payments", "dispatch_state": "sent_no_response"},
    ]) + "\n")
    done = reproduce(log, "-o", tmp_path / "s.yaml")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.yaml").read_text()
    assert "CANARY" not in text and "hunter2" not in text
    params = yaml.safe_load(text)["intents"][0]["params"]
    assert params["api_key"] == params["password"] == params["note"] == "${HARNESS_SECRET_PAYMENTS}"
    assert params["amount"] == 5


@pytest.mark.parametrize("content, says", [
    (b"hello, this is not an incident\n", "none of the formats `reproduce` reads; expected an evidence folder"),
    (b"", "none of the formats `reproduce` reads"),
    (b'{"event": "nonsense"}\n', "no operation in the log"),
])
def test_a_file_of_no_known_format_is_exit_2_naming_it(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "incident.txt"
    path.write_bytes(content)
    done = reproduce(path, "-o", tmp_path / "s.yaml")
    assert done.returncode == 2 and str(path) in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "s.yaml").exists()


def test_a_folder_that_is_no_evidence_and_a_missing_file_are_exit_2(tmp_path: Path) -> None:
    done = reproduce(tmp_path, "-o", tmp_path / "s.yaml")
    assert done.returncode == 2 and "not an evidence folder of the harness (no context.json)" in done.stderr
    done = reproduce(tmp_path / "missing.har", "-o", tmp_path / "s.yaml")
    assert done.returncode == 2 and "no such file or folder" in done.stderr


def test_secrets_in_a_har_never_reach_the_scenario(tmp_path: Path) -> None:
    """Credentials in headers, in a JSON body, in a form body and echoed in an answer: none of them in the file."""
    def entry(body: str, mime: str, status: int, answer: str) -> dict[str, object]:
        return {"startedDateTime": "2026-11-30T10:00:00.000Z", "time": 12,
                "request": {"method": "POST", "url": "https://api.example.test/v1/charges", "httpVersion": "HTTP/1.1",
                            "headers": [{"name": "Authorization", "value": "Bearer CANARY-auth-7f3"},
                                        {"name": "Cookie", "value": "session=CANARY-cookie"},
                                        {"name": "Content-Type", "value": mime},
                                        {"name": "Idempotency-Key", "value": "k-1"}],
                            "queryString": [], "cookies": [], "headersSize": -1, "bodySize": len(body),
                            "postData": {"mimeType": mime, "text": body}},
                "response": {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "headers": [],
                             "cookies": [], "content": {"size": len(answer), "mimeType": "application/json",
                                                        "text": answer},
                             "redirectURL": "", "headersSize": -1, "bodySize": len(answer)},
                "cache": {}, "timings": {"send": 0, "wait": 12, "receive": 0}}
    har = {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": [
        entry(json.dumps({"amount": 100, "api_key": "sk_live_CANARYjson", "card": {"cvc": "CANARY-cvc"}}),
              "application/json", 0, ""),
        entry(json.dumps({"amount": 100, "api_key": "sk_live_CANARYjson", "card": {"cvc": "CANARY-cvc"}}),
              "application/json", 200, json.dumps({"id": "ch_0001", "amount": 100, "secret": "CANARY-echo"})),
    ]}}
    path = tmp_path / "incident.har"
    path.write_text(json.dumps(har))
    done = reproduce(path, "-o", tmp_path / "s.yaml")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.yaml").read_text()
    assert "CANARY" not in text, text
    assert "${HARNESS_SECRET_API_EXAMPLE_TEST}" in text
    scenario = load(tmp_path / "s.yaml")
    assert [r.action for r in scenario.faults] == ["drop_response_after_commit"]
    assert run_scenario(scenario, evidence_root=tmp_path / "reference").passed


def test_a_path_with_many_ids_gets_a_placeholder_for_each() -> None:
    from harness.incident.reproduce import path_template

    assert path_template("/v1/charges/ch_000123") == "/v1/charges/{id}"
    assert path_template("/a/1/b/2/c/3/d/4/e/5") == "/a/{id}/b/{id2}/c/{id3}/d/{id4}/e/{id5}"
