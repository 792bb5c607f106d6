"""Every fault end to end: a real client (requests and httpx) -> the real proxy -> a real destination.

Each test shows what the client saw, what the destination recorded, and what the journal says.
"""

from __future__ import annotations

import httpx
import pytest
import requests

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
