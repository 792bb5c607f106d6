"""Retries as the wire saw them: urllib3's own Retry inside requests, tenacity and backoff around a POST,
a restart that finds an attempt in flight, and what the instrumentation leaves alone."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

import backoff
import pytest
import requests
import tenacity
import urllib3
from requests.adapters import HTTPAdapter

from harness.instrument import (
    Instrumentation,
    backoff_on_backoff,
    current_operation,
    instrument,
    tenacity_before_sleep,
    tenacity_wait_retry_after,
)
from harness.recorder import Recorder
from tests.instrument.loopback import ANSWER_WITHIN, INTENT, Reply, events, harness_env, serving


def attempts(tmp: Path) -> list[dict[str, Any]]:
    return [e for e in events(tmp) if e["event"] == "attempt"]


def test_urllib3_retry_inside_requests_logs_every_wire_attempt(tmp_path: Path) -> None:
    """requests with urllib3's Retry(status_forcelist=[503], POST allowed): the library retries on its own,
    and each of its wire attempts is an attempt, linked to the one before with the reason it saw."""
    replies = [Reply(503, {"error": "busy"}), Reply(429, {"error": "slow"}, {"Retry-After": "0"}),
               Reply(201, {"id": "tkt_0001"})]
    with serving(replies) as server, instrument(env=harness_env(tmp_path, server.url)) as audit:
        session = requests.Session()
        retry = urllib3.Retry(total=3, backoff_factor=0, status_forcelist=[429, 503], allowed_methods=None)
        session.mount("http://", HTTPAdapter(max_retries=retry))
        with audit.operation(INTENT, max_attempts=4) as op:
            response = session.post(server.url + "/tickets", json={"title": "x"},
                                    headers={"Idempotency-Key": op.idempotency_key}, timeout=ANSWER_WITHIN)
        assert response.status_code == 201
        assert op.effect_ref == "tkt_0001"
    first, second, third = attempts(tmp_path)
    assert [a["http_status"] for a in (first, second, third)] == [503, 429, 201]
    assert "retry_of_attempt_id" not in first
    assert (second["retry_of_attempt_id"], second["retry_reason"]) == (first["attempt_id"], "destination_5xx")
    assert (third["retry_of_attempt_id"], third["retry_reason"]) == (second["attempt_id"], "rate_limited")
    assert second["retry_after_seconds"] == 0.0
    assert [a["attempt_budget_remaining"] for a in (first, second, third)] == [3, 2, 1]
    assert len({a["traceparent"] for a in (first, second, third)}) == 3  # a fresh traceparent per wire attempt
    assert {a["idempotency_key"] for a in (first, second, third)} == {op.idempotency_key}
    assert third["prior_request_fingerprint"] == second["request_fingerprint"]


def test_tenacity_hooks_carry_the_decision_and_the_budget(tmp_path: Path) -> None:
    replies = [Reply(action="close"), Reply(429, {"error": "slow"}, {"Retry-After": "0"}), Reply(201, {"id": "t_1"})]
    with serving(replies) as server, instrument(env=harness_env(tmp_path, server.url)) as audit:
        @tenacity.retry(stop=tenacity.stop_after_attempt(5), wait=tenacity_wait_retry_after(),
                        retry=tenacity.retry_if_exception_type(requests.RequestException),
                        before_sleep=tenacity_before_sleep, reraise=True)
        def post(key: str) -> requests.Response:
            response = requests.post(server.url + "/tickets", json={"title": "x"},
                                     headers={"Idempotency-Key": key}, timeout=ANSWER_WITHIN)
            response.raise_for_status()
            return response

        with audit.operation(INTENT) as op:
            post(op.idempotency_key)
    first, second, third = attempts(tmp_path)
    assert first["dispatch_state"] == "sent_no_response"
    assert (second["retry_reason"], third["retry_reason"]) == ("response_lost_after_dispatch", "rate_limited")
    assert "tenacity: call 1 of 5 ended with ConnectionError" in second["retry_decision"]
    assert "tenacity: call 2 of 5 ended with HTTPError" in third["retry_decision"]
    # attempt 1 was logged before tenacity said its budget; from then on it is tenacity's
    assert [a["attempt_budget_remaining"] for a in (second, third)] == [3, 2]
    assert [e for e in events(tmp_path) if e["event"] == "resolution"][0]["state"] == "succeeded"


def test_backoff_handler_carries_the_decision(tmp_path: Path) -> None:
    replies = [Reply(500, {"error": "x"}), Reply(201, {"id": "t_1"})]
    with serving(replies) as server, instrument(env=harness_env(tmp_path, server.url)) as audit:
        @backoff.on_exception(backoff.constant, requests.HTTPError, interval=0, max_tries=3, jitter=None,
                              on_backoff=functools.partial(backoff_on_backoff, max_tries=3))
        def post(key: str) -> None:
            requests.post(server.url + "/tickets", json={"title": "x"}, headers={"Idempotency-Key": key},
                          timeout=ANSWER_WITHIN).raise_for_status()

        with audit.operation(INTENT) as op:
            post(op.idempotency_key)
    first, second = attempts(tmp_path)
    assert (second["retry_of_attempt_id"], second["retry_reason"]) == (first["attempt_id"], "destination_5xx")
    assert "backoff: try 1 of 3 ended with HTTPError" in second["retry_decision"]
    assert second["attempt_budget_remaining"] == 1


def test_the_hooks_cannot_make_the_reason_lie(tmp_path: Path) -> None:
    """A reason outside the vocabulary is refused; a decision never replaces the wire's reason."""
    with serving([Reply(500, {}), Reply(201, {"id": "t_1"})]) as server, \
            instrument(env=harness_env(tmp_path, server.url)) as audit, audit.operation(INTENT) as op:
        requests.post(server.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
        with pytest.raises(ValueError, match="valid: connection_not_established"):
            op.next_retry(reason="it_felt_right")
        op.next_retry(decision="my own words")
        requests.post(server.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
    second = attempts(tmp_path)[1]
    assert second["retry_reason"] == "destination_5xx"
    assert second["retry_decision"].endswith("; my own words")


def test_a_key_minted_per_attempt_is_logged_as_sent(tmp_path: Path) -> None:
    """The instrumentation reports the key each request carried, not the one the operation declared."""
    with serving([Reply(action="close"), Reply(201, {"id": "t_1"})]) as server, \
            instrument(env=harness_env(tmp_path, server.url)) as audit, audit.operation(INTENT) as op:
        for key in ("k-1", "k-2"):
            try:
                requests.post(server.url + "/tickets", json={}, headers={"Idempotency-Key": key}, timeout=ANSWER_WITHIN)
            except requests.ConnectionError:
                pass
    assert [a["idempotency_key"] for a in attempts(tmp_path)] == ["k-1", "k-2"]
    assert op.idempotency_key not in ("k-1", "k-2")


def test_explicit_failed_on_a_timeout_is_written_as_told(tmp_path: Path) -> None:
    """op.resolve() is the agent's word; with no evidence for it, it cites all there is (H006 judges it)."""
    with serving([Reply(action="close")]) as server, \
            instrument(env=harness_env(tmp_path, server.url)) as audit, audit.operation(INTENT) as op:
        try:
            requests.post(server.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
        except requests.ConnectionError:
            op.resolve("failed", reason="request failed")
    [resolution] = [e for e in events(tmp_path) if e["event"] == "resolution"]  # the scope adds none
    assert (resolution["state"], resolution["evidence"]) == ("failed", [attempts(tmp_path)[0]["attempt_id"]])


def test_restart_reports_the_attempt_in_flight_and_keeps_the_operation(tmp_path: Path) -> None:
    """Killed while a POST was in flight: the next run keeps the operation id and key, logs that attempt
    sent_no_response under its persisted id, and links its own retry to it."""
    env = harness_env(tmp_path, "http://127.0.0.1:9")
    first = Instrumentation(env=env)
    op = first.operation(INTENT)
    op._begin("POST", "/tickets", {"idempotency-key": op.idempotency_key}, b"{}")  # sent; then "killed"
    first.recorder.close()
    in_flight = json.loads((tmp_path / "state" / "harness-instrument.json").read_text())["printer-on-fire"]
    [pending] = in_flight["records"]
    assert pending["dispatch_state"] is None and not pending["logged"]
    with serving([Reply(201, {"id": "t_1"})]) as server:
        env = harness_env(tmp_path, server.url)
        with instrument(env=env) as audit:
            with audit.operation(INTENT) as again:
                assert (again.operation_id, again.idempotency_key) == (op.operation_id, op.idempotency_key)
                assert again.last_attempt is not None and again.last_attempt.dispatch_state == "sent_no_response"
                requests.post(server.url + "/tickets", json={}, headers={"Idempotency-Key": again.idempotency_key},
                              timeout=ANSWER_WITHIN)
            assert list(audit.todo()) == []  # resolved: a third run has nothing to do
    log = events(tmp_path)
    assert [e["event"] for e in log] == ["operation", "attempt", "attempt", "resolution"]
    assert log[1]["attempt_id"] == pending["attempt_id"] and log[1]["dispatch_state"] == "sent_no_response"
    assert log[2]["retry_of_attempt_id"] == pending["attempt_id"]
    assert log[2]["retry_reason"] == "response_lost_after_dispatch"


def test_requests_outside_a_scope_are_not_logged_and_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with serving([Reply(201, {"id": "t_1"})]) as server, instrument(env=harness_env(tmp_path, server.url)):
        assert current_operation() is None
        with caplog.at_level(logging.WARNING, "harness.instrument"):
            requests.post(server.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
            requests.get(server.url + "/tickets", timeout=ANSWER_WITHIN)
    assert events(tmp_path) == []
    [warning] = caplog.records
    assert "outside any operation scope" in warning.getMessage() and "POST" in warning.getMessage()


def test_other_reads_in_a_scope_are_neither_attempts_nor_evidence(tmp_path: Path) -> None:
    with serving([Reply(200, {"ok": True})]) as server, \
            instrument(env=harness_env(tmp_path, server.url)) as audit, audit.operation(INTENT):
        requests.get(server.url + "/health", timeout=ANSWER_WITHIN)
    assert [e["event"] for e in events(tmp_path)] == ["operation"]  # no attempt: nothing to resolve on


def test_unpatched_on_exit(tmp_path: Path) -> None:
    original = urllib3.connectionpool.HTTPConnectionPool._make_request
    with serving([Reply(201, {"id": "t_1"})]) as server:
        with instrument(env=harness_env(tmp_path, server.url)):
            assert urllib3.connectionpool.HTTPConnectionPool._make_request is not original
            with pytest.raises(RuntimeError, match="already active"):
                with instrument(env=harness_env(tmp_path, server.url)):
                    pass
        assert urllib3.connectionpool.HTTPConnectionPool._make_request is original
        assert urllib3.response.HTTPResponse.read.__module__ == "urllib3.response"


def test_a_given_recorder_is_used_and_left_open(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "mine.ndjson")
    env = harness_env(tmp_path, "http://127.0.0.1:9")
    with instrument(recorder, env=env) as audit, audit.operation(INTENT):
        pass
    recorder.operation("op_after", intent_id="other")  # still open
    recorder.close()
    assert [json.loads(line)["event"] for line in (tmp_path / "mine.ndjson").read_text().splitlines()] == \
        ["operation", "operation"]


def test_a_request_to_an_origin_the_harness_did_not_name_is_not_the_operations(tmp_path: Path) -> None:
    """The operation's destination has a URL: a POST elsewhere (a model API, a metrics sink) is not its attempt."""
    with serving([Reply(201, {"id": "t_1"})]) as tickets, serving([Reply(200, {"ok": True})]) as elsewhere, \
            instrument(env=harness_env(tmp_path, tickets.url)) as audit, audit.operation(INTENT):
        requests.post(elsewhere.url + "/v1/chat", json={}, timeout=ANSWER_WITHIN)
        requests.post(tickets.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
    assert [(e["event"], e.get("http_status")) for e in events(tmp_path)] == \
        [("operation", None), ("attempt", 201), ("resolution", None)]


def test_outside_the_harness_it_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="HARNESS_AUDIT_LOG is not set"):
        with instrument(env={}):
            pass
