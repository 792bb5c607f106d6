"""The addon's hooks called directly on mitmproxy test flows (no network), mitmproxy style."""

from __future__ import annotations

import asyncio

import pytest
from mitmproxy.test import taddons, tflow

from harness.journal import JournalWriter, read_journal
from harness.proxy.addon import FLOW_HEADER, FaultInjector
from harness.proxy.host import free_port
from harness.proxy.rules import FaultRule, RuleBook
from harness.proxy.state import ScenarioState


def make_state(tmp_path, *rules, secrets=()):
    return ScenarioState(book=RuleBook([FaultRule.model_validate(r) for r in rules]),
                         journal=JournalWriter(tmp_path / "j.ndjson"), by_listener={"regular": "tickets"},
                         upstreams={"tickets": ("127.0.0.1", 9)}, secrets=tuple(secrets))


def post_flow(**headers):
    f = tflow.tflow()
    f.request.method, f.request.path = "POST", "/tickets?x=1"
    f.request.content = b'{"title": "t", "client_token": "tok-1"}'
    for k, v in headers.items():
        f.request.headers[k] = v
    return f


def run(coro):
    return asyncio.run(coro)


def test_without_a_scenario_flows_pass_untouched():
    addon = FaultInjector()
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        assert FLOW_HEADER not in f.request.headers and "harness" not in f.metadata


def test_unknown_listener_is_ignored(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path)
    addon.scenario.by_listener = {}
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        assert FLOW_HEADER not in f.request.headers


def test_pass_through_is_stamped_and_journaled_with_secrets_redacted(tmp_path):
    addon = FaultInjector()
    state = addon.scenario = make_state(tmp_path, secrets=["CANARY"])
    with taddons.context(addon):
        f = post_flow(Authorization="Bearer CANARY", traceparent="00-abc-def-01", X_Note="has CANARY inside")
        run(addon.request(f))
        flow_id = f.request.headers[FLOW_HEADER]
        assert state.in_flight == 1 and not state.idle.is_set()
        f.response = tflow.tresp()
        run(addon.response(f))
        assert state.in_flight == 0 and state.idle.is_set()
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["flow_id"], e["destination"], e["method"], e["path"], e["query"]) == (
        flow_id, "tickets", "POST", "/tickets", "x=1")
    assert (e["idempotency_key"], e["traceparent"], e["forwarded"], e["upstream_status"]) == (
        "tok-1", "00-abc-def-01", True, 200)
    assert e["body_fingerprint"].startswith("sha256:") and e["client_outcome"] == "response"
    assert "CANARY" not in (tmp_path / "j.ndjson").read_text()
    assert FLOW_HEADER.lower() not in e["headers"]


def test_drop_request_kills_before_forwarding(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "d", "action": "drop_request"})
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        assert f.error and f.error.msg == "Connection killed."
        addon.error(f)  # mitmproxy's error hook after the kill must not journal twice
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["fault"], e["forwarded"], e["client_outcome"], e["forward_count"]) == (
        "drop_request", False, "connection_closed", 0)


def test_synthetic_status_answers_without_forwarding(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "s", "action": "synthetic_status", "status": 429, "retry_after": 3})
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        assert f.response.status_code == 429 and f.response.headers["retry-after"] == "3"
        run(addon.response(f))
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["forwarded"], e["upstream_status"], e["client_status"]) == (False, None, 429)


def test_drop_response_after_commit_hook(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "l", "action": "drop_response_after_commit"})
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        f.response = tflow.tresp(status_code=201)
        run(addon.response(f))
        assert f.error and f.error.msg == "Connection killed."
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["forwarded"], e["upstream_status"], e["client_outcome"], e["client_status"]) == (
        True, 201, "connection_closed", None)


def test_replace_status_keeps_the_upstream_status(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "r", "action": "replace_status", "status": 500, "body": "oops"})
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        f.response = tflow.tresp(status_code=201)
        run(addon.response(f))
        assert (f.response.status_code, f.response.content) == (500, b"oops")
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["upstream_status"], e["client_status"]) == (201, 500)


def test_error_before_upstream_connection_is_not_forwarded(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path)
    with taddons.context(addon):
        f = post_flow()
        f.server_conn.timestamp_start = None
        run(addon.request(f))
        f.error = tflow.terr()
        addon.error(f)
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["forwarded"], e["client_outcome"]) == (False, "connection_closed")


def test_flows_after_finish_are_not_journaled(tmp_path):
    addon = FaultInjector()
    state = addon.scenario = make_state(tmp_path)
    state.journal.close()
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        assert "harness" not in f.metadata


def test_duplicate_delivery_whose_extra_copy_fails_is_forwarded_once(tmp_path):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "dup", "action": "duplicate_delivery"})
    addon.scenario.upstreams = {"tickets": ("127.0.0.1", free_port())}  # nobody listens: the copy fails
    with taddons.context(addon):
        f = post_flow()
        run(addon.request(f))
        f.response = tflow.tresp(status_code=201)
        run(addon.response(f))
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["fault"], e["forwarded"], e["forward_count"], e["client_status"]) == ("duplicate_delivery", True, 1, 201)


@pytest.mark.parametrize("rule, client_gone, outcome, status", [
    ({"action": "reset_after_commit"}, False, "connection_closed", None),  # a test flow has no socket: a plain close
    ({"action": "hold_response", "hold_ms": 1}, False, "response", 201),
    ({"action": "hold_response", "hold_ms": 1}, True, "timeout", None),
    ({"action": "hold_response", "hold_ms": 1, "then": "drop"}, False, "connection_closed", None),
    ({"action": "truncate_body", "keep_bytes": 3}, False, "connection_closed", 201),
    ({"action": "malformed_chunk"}, False, "connection_closed", 201),
    ({"action": "latency", "delay_ms": 1}, False, "response", 201),
])
def test_hooks_dispatch_to_the_action_handler(tmp_path, rule, client_gone, outcome, status):
    addon = FaultInjector()
    addon.scenario = make_state(tmp_path, {"id": "f", **rule})
    with taddons.context(addon):
        f = post_flow()
        if not client_gone:
            f.client_conn.timestamp_end = None
        run(addon.request(f))
        f.response = tflow.tresp(status_code=201, content=b'{"id": "tkt_1"}')
        run(addon.response(f))
    (e,) = read_journal(tmp_path / "j.ndjson")
    assert (e["fault"], e["forwarded"], e["upstream_status"], e["client_outcome"], e["client_status"]) == \
        (rule["action"], True, 201, outcome, status)
    if rule["action"] == "truncate_body":
        assert (f.response.raw_content, f.response.headers["content-length"]) == (b'{"i', "15")
    if rule["action"] == "malformed_chunk":
        assert f.response.raw_content.startswith(b"zz\r\n") and "content-length" not in f.response.headers
