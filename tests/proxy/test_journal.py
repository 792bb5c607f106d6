"""The proxy journal writer and reader (no network)."""

from __future__ import annotations

import json

import pytest

from harness.journal import FIELDS, JournalError, JournalWriter, read_journal, redact_headers, redaction


def test_fields_exactly_as_the_contract(tmp_path):
    path = tmp_path / "j.ndjson"
    with JournalWriter(path) as j:
        j.write({"flow_id": "flw_1", "forwarded": True, "client_outcome": "response", "client_status": 201})
        j.write({"flow_id": "flw_2", "client_outcome": "connection_closed"})
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    assert list(first) == list(FIELDS)
    assert {"seq", "flow_id", "ts_request", "ts_done", "destination", "method", "path", "query", "headers",
            "body_fingerprint", "idempotency_key", "traceparent", "rule_id", "fault", "forwarded",
            "upstream_status", "client_outcome", "client_status"} <= set(first)
    entries = read_journal(path)
    assert [(e["seq"], e["_line"], e["forward_count"]) for e in entries] == [(1, 1, 1), (2, 2, 0)]


def test_each_line_is_on_disk_before_close(tmp_path):
    path = tmp_path / "j.ndjson"
    j = JournalWriter(path)
    j.write({"flow_id": "flw_1"})
    assert read_journal(path)[0]["flow_id"] == "flw_1"
    j.close()
    with pytest.raises(ValueError, match="closed"):
        j.write({"flow_id": "flw_2"})


def test_unknown_field_and_outcome_rejected(tmp_path):
    with JournalWriter(tmp_path / "j.ndjson") as j:
        with pytest.raises(ValueError, match="unknown journal field.*'colour'.*valid: seq"):
            j.write({"colour": 1})
        with pytest.raises(ValueError, match="client_outcome 'lost' is not one of response"):
            j.write({"client_outcome": "lost"})


def test_redaction():
    headers = [("Authorization", "Bearer s3cret-token"), ("Cookie", "sid=1"), ("X-Api", "key=CANARY-42;x"),
               ("Accept", "*/*"), ("X-Dup", "a"), ("x-dup", "b")]
    out = redact_headers(headers, ["CANARY-42", ""])
    assert out["authorization"] == redaction("Bearer s3cret-token")
    assert out["cookie"].startswith("redacted:sha256:") and len(out["cookie"]) == len("redacted:sha256:") + 12
    assert out["x-api"] == f"key={redaction('CANARY-42')};x"
    assert out["accept"] == "*/*" and out["x-dup"] == "a, b"
    assert "s3cret" not in json.dumps(out) and "CANARY-42" not in json.dumps(out)


def test_read_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.ndjson"
    path.write_text('{"seq": 1}\n\n[1]\n')
    with pytest.raises(JournalError, match=r"bad.ndjson:3: expected a JSON object, got list"):
        read_journal(path)
    path.write_text('{"seq": 1}\n{"seq": \n')
    with pytest.raises(JournalError, match=r"bad.ndjson:2: not JSON"):
        read_journal(path)
    assert read_journal(tmp_path / "missing.ndjson") == []
