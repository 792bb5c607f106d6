"""Targeting and seeded determinism through the real proxy, as a client sees it."""

from __future__ import annotations

import httpx
import pytest
import requests


def statuses(url, n, **kw):
    return [requests.post(url + "/tickets", json=kw.get("json", {"t": i}), headers=kw.get("headers"),
                          timeout=5).status_code
            for i in range(n)]


def test_first_two_attempts_then_through(scenario):
    routes = scenario.configure([{"id": "busy", "action": "synthetic_status", "status": 503, "match": {"first": 2}}])
    assert statuses(routes.urls["tickets"], 4) == [503, 503, 201, 201]


def test_every_third(scenario):
    routes = scenario.configure([{"id": "tick", "action": "synthetic_status", "status": 500, "match": {"every": 3}}])
    assert statuses(routes.urls["tickets"], 7) == [201, 201, 500, 201, 201, 500, 201]


def test_nth_with_the_same_idempotency_key(scenario, destination):
    """The second attempt of each operation (same key) is throttled; other operations are not disturbed."""
    routes = scenario.configure([{"id": "retry_hits_429", "action": "synthetic_status", "status": 429, "retry_after": 1,
                                  "match": {"method": "POST", "nth": 2, "per": "idempotency_key"}}])
    url = routes.urls["tickets"] + "/tickets"
    got = [httpx.post(url, json={}, headers={"Idempotency-Key": k}, timeout=5).status_code
           for k in ["a", "b", "a", "a", "b"]]
    assert got == [201, 201, 429, 201, 429]
    assert [e["idempotency_key"] for e in scenario.journal() if e["fault"]] == ["a", "b"]


def test_nth_with_the_same_fingerprint(scenario):
    routes = scenario.configure([{"id": "same_payload", "action": "synthetic_status", "status": 409,
                                  "match": {"nth": 2, "per": "fingerprint"}}])
    url = routes.urls["tickets"]
    got = [requests.post(url + "/tickets", json=body, timeout=5).status_code for body in ({"a": 1}, {"a": 2}, {"a": 1})]
    assert got == [201, 201, 409]


def test_header_and_body_field_and_path_template(scenario):
    routes = scenario.configure([
        {"id": "tenant", "action": "synthetic_status", "status": 503, "match": {"headers": {"X-Tenant": "acme"}}},
        {"id": "vip", "action": "synthetic_status", "status": 500, "match": {"body": {"customer.tier": "vip"}}},
        {"id": "one_ticket", "action": "synthetic_status", "status": 404,
         "match": {"method": "GET", "path": "/tickets/{id}"}},
    ])
    url = routes.urls["tickets"]
    assert requests.post(url + "/tickets", json={}, headers={"X-Tenant": "acme"}, timeout=5).status_code == 503
    assert requests.post(url + "/tickets", json={}, headers={"X-Tenant": "other"}, timeout=5).status_code == 201
    assert requests.post(url + "/tickets", json={"customer": {"tier": "vip"}}, timeout=5).status_code == 500
    assert requests.get(url + "/tickets/7?full=1", timeout=5).status_code == 404
    assert requests.get(url + "/tickets", timeout=5).status_code == 200


def _run(scenario, seed):
    routes = scenario.configure([{"id": "flaky", "action": "synthetic_status", "status": 503,
                                  "match": {"probability": 0.5}}], seed=seed)
    return statuses(routes.urls["tickets"], 24)


def test_same_seed_same_outcome(scenario):
    a, b, c = _run(scenario, 11), _run(scenario, 11), _run(scenario, 12)
    assert a == b
    assert a != c
    assert 503 in a and 201 in a


@pytest.mark.parametrize("seed", [3])
def test_seeded_jitter_is_recorded_as_latency(scenario, seed):
    routes = scenario.configure([{"id": "slow", "action": "latency", "delay_ms": 1, "jitter_ms": 5,
                                  "match": {"method": "POST"}}], seed=seed)
    assert statuses(routes.urls["tickets"], 2) == [201, 201]
    assert [e["fault"] for e in scenario.journal()] == ["latency", "latency"]
