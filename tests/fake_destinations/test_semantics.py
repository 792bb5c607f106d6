"""Every idempotency contract and fault the destinations offer, shown through real HTTP."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import requests

TICKET = {"title": "t", "project": "p", "client_reference": "op_1"}


def post(host, name, path, body, key=None, **headers):
    if key is not None:
        headers["Idempotency-Key"] = key
    return requests.post(host.urls[name] + path, json=body, headers=headers, timeout=10)


def refs(host, destination=None):
    return [e["effect_ref"] for e in host.effects() if destination in (None, e["destination"])]


# -- Stripe-like ---------------------------------------------------------------------------------

def test_stripe_replays_a_stored_500_and_never_commits(destinations):
    first = post(destinations, "tickets_failing", "/tickets", TICKET, "k")  # request 1: 500 before commit
    again = post(destinations, "tickets_failing", "/tickets", TICKET, "k")
    assert first.status_code == again.status_code == 500
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert refs(destinations) == []
    assert [r["outcome"] for r in destinations.requests()] == ["failed_before_commit", "replayed"]
    # a new key is a new request: it commits
    assert post(destinations, "tickets_failing", "/tickets", TICKET, "k2").status_code == 503  # request 3


def test_error_after_commit_leaves_the_effect_and_replays_the_error(destinations):
    post(destinations, "tickets_failing", "/tickets", TICKET, "a")             # 1: 500 before commit
    assert post(destinations, "tickets_failing", "/tickets", TICKET, "b").status_code == 201  # 2
    lost = post(destinations, "tickets_failing", "/tickets", TICKET, "c")      # 3: 503 after commit
    assert lost.status_code == 503
    assert refs(destinations) == ["tkt_0001", "tkt_0002"]
    last = destinations.requests()[-1]
    assert last["outcome"] == "failed_after_commit" and last["effect_ref"] == "tkt_0002"
    replay = post(destinations, "tickets_failing", "/tickets", TICKET, "c")
    assert replay.status_code == 503 and replay.headers["Idempotent-Replayed"] == "true"
    assert len(refs(destinations)) == 2


def test_retention_expiry_commits_again(destinations):
    assert post(destinations, "tickets_short_keys", "/tickets", TICKET, "k").status_code == 201
    destinations.advance_clock(59)
    assert post(destinations, "tickets_short_keys", "/tickets", TICKET, "k").headers["Idempotent-Replayed"] == "true"
    destinations.advance_clock(2)  # past the 60 s retention window: the key is forgotten
    late = post(destinations, "tickets_short_keys", "/tickets", TICKET, "k")
    assert late.status_code == 201 and "Idempotent-Replayed" not in late.headers
    assert refs(destinations) == ["tkt_0001", "tkt_0002"]


# -- IETF draft ----------------------------------------------------------------------------------

def test_ietf_missing_key_is_400(destinations):
    response = post(destinations, "tickets_ietf", "/tickets", TICKET)
    assert response.status_code == 400 and response.json()["error"] == "idempotency_key_missing"
    assert refs(destinations) == []


def test_ietf_retry_while_processing_is_409_and_payload_change_is_422(destinations):
    url = destinations.urls["tickets_ietf"] + "/tickets"
    first: dict = {}

    def slow_first() -> None:
        first["response"] = httpx.post(url, json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)

    thread = threading.Thread(target=slow_first)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while "k" not in destinations.state()["in_flight"]["tickets_ietf"]:  # the first is being processed
            assert time.monotonic() < deadline, "first request never became in-flight"
            time.sleep(0.01)
        during = httpx.post(url, json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)
        assert during.status_code == 409 and during.json()["error"] == "idempotency_key_in_use"
    finally:
        thread.join(15)
    assert first["response"].status_code == 201
    after = httpx.post(url, json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)
    assert after.status_code == 201 and after.headers["Idempotent-Replayed"] == "true"
    changed = httpx.post(url, json={**TICKET, "title": "other"}, headers={"Idempotency-Key": "k"}, timeout=10)
    assert changed.status_code == 422
    assert refs(destinations) == ["tkt_0001"]
    assert [r["outcome"] for r in destinations.requests()] == ["rejected", "committed", "replayed", "rejected"]


# -- EC2-like client token -----------------------------------------------------------------------

def test_client_token_returns_the_existing_instance(destinations):
    body = {"image": "ami-1", "client_token": "tok-1", "client_reference": "op_1"}
    first = post(destinations, "vms", "/instances", body)
    again = post(destinations, "vms", "/instances", body)
    assert first.status_code == 201 and again.json() == first.json() and first.json()["id"] == "i_0001"
    assert "client_token" not in first.json()
    mismatch = post(destinations, "vms", "/instances", {**body, "image": "ami-2"})
    assert mismatch.status_code == 400 and mismatch.json()["error"] == "IdempotentParameterMismatch"
    assert refs(destinations) == ["i_0001"]
    assert [r["idempotency_key"] for r in destinations.requests()] == ["tok-1"] * 3
    assert destinations.effects()[0]["operation_key"] == "tok-1"


def test_client_token_does_not_remember_a_failure(destinations):
    body = {"image": "ami-1", "client_token": "tok-1"}
    assert post(destinations, "vms_failing", "/instances", body).status_code == 500  # before commit
    retry = post(destinations, "vms_failing", "/instances", body)  # unlike stripe: no stored 500
    assert retry.status_code == 201 and retry.json()["id"] == "i_0001"
    assert [r["outcome"] for r in destinations.requests()] == ["failed_before_commit", "committed"]


def test_client_token_ignores_idempotency_header(destinations):
    post(destinations, "vms", "/instances", {"image": "ami-1"}, "header-key")
    post(destinations, "vms", "/instances", {"image": "ami-1"}, "header-key")
    assert refs(destinations) == ["i_0001", "i_0002"]


# -- key scope and volatile fields -----------------------------------------------------------------

def test_account_scope_keys_are_per_account_and_volatile_fields_are_ignored(destinations):
    body = {**TICKET, "sent_at": "2024-01-01T00:00:00Z"}
    a = post(destinations, "tickets_scoped", "/tickets", body, "k", **{"X-Account": "acme"})
    b = post(destinations, "tickets_scoped", "/tickets", body, "k", **{"X-Account": "globex"})
    assert a.json()["id"] != b.json()["id"]  # same key, other account: another effect
    retry = post(destinations, "tickets_scoped", "/tickets", {**body, "sent_at": "2024-01-01T00:00:09Z"}, "k",
                 **{"X-Account": "acme"})
    assert retry.headers["Idempotent-Replayed"] == "true"  # only a volatile field changed
    fps = {r["payload_fingerprint"] for r in destinations.requests()}
    assert len(fps) == 1
    assert len(refs(destinations)) == 2


def test_path_scope(destinations):
    post(destinations, "tickets_path_scoped", "/tickets", TICKET, "k")
    assert post(destinations, "tickets_path_scoped", "/tickets", TICKET, "k").headers["Idempotent-Replayed"] == "true"
    post(destinations, "tickets", "/tickets", TICKET, "k")  # another destination never shares keys
    assert len(refs(destinations)) == 2


# -- no idempotency ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, path, body", [
    ("webhooks", "/deliveries", {"url": "https://example.test/hook", "event": "paid"}),
    ("email", "/messages", {"to": "a@example.test", "subject": "hi"}),
])
def test_none_commits_every_time_even_with_a_key(destinations, name, path, body):
    post(destinations, name, path, body, "k")
    post(destinations, name, path, body, "k")
    assert len(refs(destinations, name)) == 2


def test_payments_are_stripe_like(destinations):
    body = {"amount": 1000, "currency": "eur", "client_reference": "op_9"}
    post(destinations, "payments", "/payments", body, "k")
    assert post(destinations, "payments", "/payments", body, "k").headers["Idempotent-Replayed"] == "true"
    assert refs(destinations) == ["pay_0001"]


# -- naturally idempotent PUT and DELETE, and a PUT that notifies ---------------------------------

def test_put_sets_state_once_and_delete_is_idempotent_in_effect(destinations):
    url = destinations.urls["accounts"] + "/accounts/A"
    first = requests.put(url, json={"status": "disabled"}, timeout=10)
    again = requests.put(url, json={"status": "disabled"}, timeout=10)
    assert first.status_code == again.status_code == 200
    assert first.json()["revision"] == again.json()["revision"] == "A@r1"
    assert [r["outcome"] for r in destinations.requests()] == ["committed", "replayed"]
    assert requests.delete(url, timeout=10).status_code == 200
    assert requests.delete(url, timeout=10).status_code == 404  # same state, other answer
    assert refs(destinations) == ["A@r1", "A@deleted"]
    assert [e["kind"] for e in destinations.effects()] == ["account_updated", "account_deleted"]


def test_put_that_notifies_makes_an_effect_on_every_call(destinations):
    url = destinations.urls["accounts_notifying"] + "/accounts/A"
    for _ in range(3):
        assert requests.put(url, json={"status": "disabled"}, timeout=10).status_code == 200
    kinds = [e["kind"] for e in destinations.effects()]
    assert kinds == ["account_updated", "notification_sent", "notification_sent", "notification_sent"]


# -- async ---------------------------------------------------------------------------------------

def test_async_202_then_status_endpoint(destinations):
    url = destinations.urls["deployments"]
    accepted = requests.post(url + "/deployments", json={"service": "api", "version": "1.2"},
                             headers={"Idempotency-Key": "d1"}, timeout=10)
    assert accepted.status_code == 202
    operation = accepted.json()["operation"]
    assert operation["status"] == "pending"
    status_url = url + operation["status_url"]
    assert requests.get(status_url, timeout=10).json()["status"] == "pending"
    destinations.advance_clock(31)
    done = requests.get(status_url, timeout=10).json()
    assert done == {"id": operation["id"], "status": "succeeded", "effect_ref": accepted.json()["id"]}
    assert destinations.requests()[0]["outcome"] == "accepted_async"
    replay = requests.post(url + "/deployments", json={"service": "api", "version": "1.2"},
                           headers={"Idempotency-Key": "d1"}, timeout=10)
    assert replay.status_code == 202 and replay.headers["Idempotent-Replayed"] == "true"
    assert refs(destinations) == ["dep_0001"]
    assert requests.get(url + "/operations/opn_0404", timeout=10).status_code == 404


# -- lookup --------------------------------------------------------------------------------------

def test_lookup_lag_hides_a_fresh_commit(destinations):
    post(destinations, "tickets_lagging", "/tickets", TICKET, "k")
    lookup = destinations.urls["tickets_lagging"] + "/tickets"
    assert requests.get(lookup, params={"client_reference": "op_1"}, timeout=10).json() == {"items": []}
    destinations.advance_clock(5)
    assert [t["id"] for t in requests.get(lookup, params={"client_reference": "op_1"}, timeout=10).json()["items"]] \
        == ["tkt_0001"]


def test_no_lookup_at_all(destinations):
    post(destinations, "email", "/messages", {"to": "a@example.test", "subject": "hi", "client_reference": "op_1"})
    response = requests.get(destinations.urls["email"] + "/messages", params={"client_reference": "op_1"}, timeout=10)
    assert response.status_code == 404 and "no lookup" in response.json()["message"]


# -- rate limiting -------------------------------------------------------------------------------

def test_declared_429_then_window_limit_with_retry_after(destinations):
    first = post(destinations, "tickets_limited", "/tickets", TICKET, "k1")  # declared 429 (counts in window)
    assert first.status_code == 429 and first.headers["Retry-After"] == "3"
    assert post(destinations, "tickets_limited", "/tickets", TICKET, "k1").status_code == 201  # 429 not stored
    over = post(destinations, "tickets_limited", "/tickets", TICKET, "k2")  # 3rd write in a 2-per-60s window
    assert over.status_code == 429 and over.headers["Retry-After"] == "7"
    destinations.advance_clock(61)
    assert post(destinations, "tickets_limited", "/tickets", TICKET, "k2").status_code == 201
    assert [r["outcome"] for r in destinations.requests()].count("rate_limited") == 2
    assert len(refs(destinations)) == 2
