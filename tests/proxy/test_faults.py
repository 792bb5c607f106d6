"""Every fault end to end: a real client (requests and httpx) -> the real proxy -> a real destination.

Each test shows what the client saw, what the destination recorded, and what the journal says. The
handler registry (``harness/proxy/faults.py``) is held equal to the declared actions.
"""

from __future__ import annotations

import httpx
import pytest
import requests

from harness.proxy import faults
from harness.proxy.rules import ACTIONS

LOSE_FIRST_CREATE = {"id": "lose_first_create", "action": "drop_response_after_commit",
                     "match": {"destination": "tickets", "method": "POST", "path": "/tickets", "nth": 1}}


def post_requests(url: str, **kw):
    return requests.post(url + "/tickets", json={"title": "disk full"}, timeout=5, **kw)


def post_httpx(url: str, **kw):
    return httpx.post(url + "/tickets", json={"title": "disk full"}, timeout=5, **kw)


CLIENTS = {"requests": (post_requests, requests.ConnectionError),
           "httpx": (post_httpx, httpx.TransportError)}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_drop_response_after_commit(scenario, destination, client):
    post, lost = CLIENTS[client]
    routes = scenario.configure([LOSE_FIRST_CREATE])
    assert routes.env == {}
    with pytest.raises(lost):
        post(routes.urls["tickets"], headers={"Idempotency-Key": "op_1"})
    # The destination committed although the client got nothing.
    assert len(destination.effects) == 1
    second = post(routes.urls["tickets"], headers={"Idempotency-Key": "op_1"})
    assert second.status_code == 201
    first, retry = scenario.journal()
    assert (first["forwarded"], first["upstream_status"], first["client_outcome"], first["client_status"]) == \
        (True, 201, "connection_closed", None)
    assert (first["rule_id"], first["fault"]) == ("lose_first_create", "drop_response_after_commit")
    assert (retry["rule_id"], retry["client_outcome"], retry["client_status"]) == (None, "response", 201)
    # The flow id stamped on the forwarded request ties the journal to the destination's records.
    assert [r["flow_id"] for r in destination.requests] == [first["flow_id"], retry["flow_id"]]
    assert "x-harness-flow" not in {k.lower() for k in second.headers}


def test_nth_targets_first_request_whatever_the_key(scenario, destination):
    """A wrong agent that mints a new key per attempt is still hit on its first request only."""
    routes = scenario.configure([LOSE_FIRST_CREATE])
    with pytest.raises(requests.ConnectionError):
        post_requests(routes.urls["tickets"], headers={"Idempotency-Key": "k-a"})
    assert post_requests(routes.urls["tickets"], headers={"Idempotency-Key": "k-b"}).status_code == 201
    assert len(destination.effects) == 2
    assert [e["fault"] for e in scenario.journal()] == ["drop_response_after_commit", None]


def test_reconfigure_resets_counters(scenario, destination, tmp_path):
    routes = scenario.configure([LOSE_FIRST_CREATE])
    with pytest.raises(requests.ConnectionError):
        post_requests(routes.urls["tickets"])
    routes = scenario.host.configure({"tickets": destination.url}, [LOSE_FIRST_CREATE], tmp_path / "second.ndjson")
    with pytest.raises(requests.ConnectionError):
        post_requests(routes.urls["tickets"])
    assert len(destination.effects) == 2


# -- the catalogue, table-driven ------------------------------------------------------------------
# name -> (rule fields, what each client sees: an exception class name or a status,
#          requests the destination received, effects it committed, journal expectations)
CREATE = {"destination": "tickets", "method": "POST", "path": "/tickets", "nth": 1}
CATALOGUE = {
    "reset_after_commit": (
        {"action": "reset_after_commit"},
        {"requests": "ConnectionError", "httpx": "ReadError"}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "connection_reset", "client_status": None}),
    "drop_request": (
        {"action": "drop_request"},
        {"requests": "ConnectionError", "httpx": "RemoteProtocolError"}, 0, 0,
        {"forwarded": False, "upstream_status": None, "client_outcome": "connection_closed", "forward_count": 0}),
    "synthetic_503": (
        {"action": "synthetic_status", "status": 503},
        {"requests": 503, "httpx": 503}, 0, 0,
        {"forwarded": False, "upstream_status": None, "client_outcome": "response", "client_status": 503}),
    "synthetic_429": (
        {"action": "synthetic_status", "status": 429, "retry_after": 7},
        {"requests": 429, "httpx": 429}, 0, 0,
        {"forwarded": False, "client_outcome": "response", "client_status": 429, "client_retry_after": "7"}),
    "synthetic_500": (
        {"action": "synthetic_status", "status": 500, "body": "boom"},
        {"requests": 500, "httpx": 500}, 0, 0,
        {"forwarded": False, "client_status": 500}),
    "replace_status_after_commit": (
        {"action": "replace_status", "status": 502},
        {"requests": 502, "httpx": 502}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "response", "client_status": 502}),
    "truncate_body": (
        {"action": "truncate_body", "keep_bytes": 10},
        {"requests": "ChunkedEncodingError", "httpx": "RemoteProtocolError"}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "connection_closed", "client_status": 201}),
    "malformed_chunk": (
        {"action": "malformed_chunk"},
        {"requests": "ChunkedEncodingError", "httpx": "RemoteProtocolError"}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "connection_closed", "client_status": 201}),
    "duplicate_delivery": (
        {"action": "duplicate_delivery"},
        {"requests": 201, "httpx": 201}, 2, 2,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "response", "forward_count": 2}),
    "latency": (
        {"action": "latency", "delay_ms": 20, "jitter_ms": 10},
        {"requests": 201, "httpx": 201}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_outcome": "response", "client_status": 201}),
    # the MCP tool error actions on a flow that is no JSON-RPC tools/call (MCP flows: fake_destinations/test_mcp.py)
    "tool_error_result_not_rpc": (
        {"action": "tool_error_result"},
        {"requests": 400, "httpx": 400}, 0, 0,
        {"forwarded": False, "client_status": 400, "rpc": None,
         "fault_note": faults.NOT_A_TOOL_CALL.format(action="tool_error_result")}),
    "tool_error_after_commit_not_rpc": (
        {"action": "tool_error_after_commit"},
        {"requests": 400, "httpx": 400}, 1, 1,
        {"forwarded": True, "upstream_status": 201, "client_status": 400, "rpc": None,
         "fault_note": faults.NOT_A_TOOL_CALL.format(action="tool_error_after_commit")}),
}


def _outcome(post, url):
    try:
        resp = post(url, headers={"Idempotency-Key": "op_1", "Connection": "keep-alive"})
    except Exception as e:  # what the client saw is the assertion's subject
        return type(e).__name__, None
    if resp.status_code < 300:
        resp.json()
    return resp.status_code, resp


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_catalogue(scenario, destination, fault, client):
    fields, seen, n_requests, n_effects, journal = CATALOGUE[fault]
    post, _ = CLIENTS[client]
    routes = scenario.configure([{"id": fault, "match": CREATE, **fields}])
    saw, resp = _outcome(post, routes.urls["tickets"])
    assert saw == seen[client]
    assert (len(destination.requests), len(destination.effects)) == (n_requests, n_effects)
    # A second, untargeted request goes through untouched (nth: 1 fired once).
    assert post(routes.urls["tickets"]).status_code == 201
    first, second = scenario.journal()
    assert (first["rule_id"], first["fault"]) == (fault, fields["action"])
    assert {k: first[k] for k in journal} == journal
    assert (second["fault"], second["client_outcome"], second["client_status"]) == (None, "response", 201)
    if fault == "synthetic_429":
        assert resp.headers["Retry-After"] == "7"
    if fault == "duplicate_delivery":
        assert destination.requests[0]["flow_id"] == destination.requests[1]["flow_id"] == first["flow_id"]


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_refuse_connection_is_a_true_not_sent(scenario, destination, client):
    post, _ = CLIENTS[client]
    routes = scenario.configure([{"id": "down", "action": "refuse_connection", "match": {"destination": "tickets"}}])
    saw, _ = _outcome(post, routes.urls["tickets"])
    assert saw == {"requests": "ConnectionError", "httpx": "ConnectError"}[client]
    assert destination.requests == []
    assert scenario.journal() == []  # no request ever crossed


@pytest.mark.parametrize("then, client_outcome", [("deliver", "timeout"), ("drop", "timeout")])
def test_hold_response_past_client_timeout(scenario, destination, then, client_outcome):
    routes = scenario.configure([{"id": "slow", "action": "hold_response", "hold_ms": 1500, "then": then,
                                  "match": CREATE}])
    with pytest.raises(requests.ReadTimeout):
        requests.post(routes.urls["tickets"] + "/tickets", json={}, timeout=(5, 0.2))
    assert len(destination.effects) == 1  # committed while the client waited
    (entry,) = scenario.journal()
    assert (entry["fault"], entry["forwarded"], entry["upstream_status"], entry["client_outcome"]) == \
        ("hold_response", True, 201, client_outcome)


def test_hold_response_then_deliver_to_a_patient_client(scenario, destination):
    routes = scenario.configure([{"id": "slow", "action": "hold_response", "hold_ms": 100, "match": CREATE}])
    assert httpx.post(routes.urls["tickets"] + "/tickets", json={}, timeout=10).status_code == 201
    (entry,) = scenario.journal()
    assert (entry["client_outcome"], entry["client_status"]) == ("response", 201)


# -- the handler registry --------------------------------------------------------------------------

def test_every_declared_action_has_exactly_one_handler():
    by_phase = {phase: {n for n, a in ACTIONS.items() if a.phase == phase} for phase in ("request", "response")}
    assert set(faults.REQUEST_HANDLERS) == by_phase["request"]
    assert set(faults.RESPONSE_HANDLERS) == by_phase["response"]
    assert {n for n, a in ACTIONS.items() if a.phase == "connection"} == faults.HOST_ACTIONS
    faults.check_handlers(faults.REQUEST_HANDLERS, faults.RESPONSE_HANDLERS)


def test_a_missing_or_undeclared_handler_is_a_clear_error():
    request = dict(faults.REQUEST_HANDLERS)
    del request["latency"]
    with pytest.raises(ValueError, match=r"request-phase .* declared without a handler \['latency'\]"):
        faults.check_handlers(request, faults.RESPONSE_HANDLERS)
    with pytest.raises(ValueError, match=r"handled but not declared \['teleport'\]"):
        faults.check_handlers(faults.REQUEST_HANDLERS, {**faults.RESPONSE_HANDLERS, "teleport": None})


@pytest.mark.parametrize("register, name, message", [
    (faults.on_request, "teleport", "no fault action 'teleport' is declared"),
    (faults.on_request, "hold_response", "declared for the response phase, not the request phase"),
    (faults.on_response, "latency", "declared for the request phase, not the response phase"),
    (faults.on_request, "latency", "'latency' already has a handler"),
    (faults.on_response, "truncate_body", "'truncate_body' already has a handler"),
])
def test_registering_a_handler_checks_the_declaration(register, name, message):
    with pytest.raises(ValueError, match=message):
        register(name)


def test_every_declared_action_is_tested_end_to_end_here():
    tested = {fields["action"] for fields, *_ in CATALOGUE.values()}
    # their own tests above and below
    tested |= {"drop_response_after_commit", "refuse_connection", "hold_response", "kill_sender_after_commit"}
    assert tested == set(ACTIONS)


def test_kill_sender_after_commit_kills_the_process_that_sent_the_request(scenario, destination):
    """A process fault: the sender (here a child process, as a queue's worker would be) dies after the destination
    committed, before it reads the answer; the journal names the process it killed."""
    import signal
    import subprocess
    import sys

    routes = scenario.configure([{"id": "kill_the_worker", "match": CREATE, "action": "kill_sender_after_commit"}])
    code = ("import requests, sys; requests.post(sys.argv[1] + '/tickets', json={'title': 'disk full'}, timeout=10); "
            "print('read the answer')")
    worker = subprocess.run([sys.executable, "-c", code, routes.urls["tickets"]], capture_output=True, text=True,
                            timeout=30)
    assert worker.returncode == -signal.SIGKILL and "read the answer" not in worker.stdout
    assert len(destination.effects) == 1  # committed before the kill
    assert post_requests(routes.urls["tickets"]).status_code == 201  # the rule fired once: nth 1
    first, second = scenario.journal()
    assert (first["fault"], first["forwarded"], first["upstream_status"], first["client_outcome"]) == \
        ("kill_sender_after_commit", True, 201, "connection_closed")
    killed = first["process_killed"]
    assert killed["command"].startswith(sys.executable) and isinstance(killed["pid"], int) and killed["ts"] > 0
    assert first["fault_note"] is None and second["process_killed"] is None
