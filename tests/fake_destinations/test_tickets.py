"""Tickets with Stripe-like idempotency, lookup by client reference, and the ledger, over real HTTP."""

from __future__ import annotations

import requests

from fake_destinations.ledger import read_effects, read_requests

TICKET = {"title": "Printer on fire", "project": "OPS", "client_reference": "op_1"}


def post(host, name, body, key=None, **headers):
    if key is not None:
        headers["Idempotency-Key"] = key
    return requests.post(host.urls[name] + "/tickets", json=body, headers=headers, timeout=10)


def test_create_ticket_commits_one_effect(destinations):
    response = post(destinations, "tickets", TICKET, "key-1", traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
                    **{"X-Harness-Flow": "flow-1"})
    assert response.status_code == 201
    assert response.json() == {"id": "tkt_0001", **TICKET, "status": "open"}
    assert "Idempotent-Replayed" not in response.headers
    [effect] = read_effects(destinations.ledger_path)
    [request] = read_requests(destinations.ledger_path)
    assert effect["effect_ref"] == "tkt_0001" and effect["kind"] == "ticket_created"
    assert effect["operation_key"] == "key-1" and effect["client_reference"] == "op_1"
    assert effect["request_seq"] == request["seq"] and effect["flow_id"] == "flow-1" and effect["replay"] == 0
    assert request["outcome"] == "committed" and request["status"] == 201
    assert request["flow_id"] == "flow-1" and request["traceparent"].startswith("00-aaaa")
    assert request["payload_fingerprint"] == effect["payload_fingerprint"]
    assert request["payload_fingerprint"].startswith("sha256:")


def test_same_key_same_payload_replays_without_new_effect(destinations):
    first = post(destinations, "tickets", TICKET, "key-1")
    second = post(destinations, "tickets", TICKET, "key-1")
    assert second.status_code == first.status_code == 201
    assert second.json() == first.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert [e["effect_ref"] for e in destinations.effects()] == ["tkt_0001"]
    assert [r["outcome"] for r in destinations.requests()] == ["committed", "replayed"]
    assert destinations.requests()[1]["effect_ref"] == "tkt_0001"


def test_same_key_other_payload_is_422_and_commits_nothing(destinations):
    post(destinations, "tickets", TICKET, "key-1")
    response = post(destinations, "tickets", {**TICKET, "title": "Other"}, "key-1")
    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused"
    assert len(destinations.effects()) == 1
    assert destinations.requests()[-1]["outcome"] == "rejected"


def test_without_key_every_post_commits(destinations):
    post(destinations, "tickets", TICKET)
    post(destinations, "tickets", TICKET)
    assert [e["effect_ref"] for e in destinations.effects()] == ["tkt_0001", "tkt_0002"]


def test_lookup_by_client_reference_and_read_by_id(destinations):
    post(destinations, "tickets", TICKET, "key-1")
    post(destinations, "tickets", {**TICKET, "client_reference": "op_2"}, "key-2")
    url = destinations.urls["tickets"]
    found = requests.get(url + "/tickets", params={"client_reference": "op_1"}, timeout=10).json()
    assert [t["id"] for t in found["items"]] == ["tkt_0001"]
    assert requests.get(url + "/tickets", params={"client_reference": "nope"}, timeout=10).json() == {"items": []}
    assert requests.get(url + "/tickets/tkt_0002", timeout=10).json()["client_reference"] == "op_2"
    missing = requests.get(url + "/tickets/tkt_0099", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert destinations.requests()[-1]["outcome"] == "read"
    assert len(destinations.effects()) == 2  # reads commit nothing


def test_missing_required_field_is_400_naming_it(destinations):
    response = post(destinations, "tickets", {"title": "x"}, "key-1")
    assert response.status_code == 400
    assert "project" in response.json()["message"]
    assert destinations.effects() == []
    # a rejected request was not stored under the key: the corrected request commits
    assert post(destinations, "tickets", TICKET, "key-1").status_code == 201


def test_non_json_body_is_400(destinations):
    response = requests.post(destinations.urls["tickets"] + "/tickets", data=b"not json",
                             headers={"Idempotency-Key": "k"}, timeout=10)
    assert response.status_code == 400 and response.json()["error"] == "invalid_json"


def test_unknown_route_and_method_are_recorded(destinations):
    url = destinations.urls["tickets"]
    assert requests.post(url + "/nowhere", json={}, timeout=10).status_code == 404
    assert requests.delete(url + "/tickets", timeout=10).status_code == 405
    assert [r["outcome"] for r in destinations.requests()] == ["rejected", "rejected"]


def test_reset_clears_keys_and_ledger(destinations):
    post(destinations, "tickets", TICKET, "key-1")
    destinations.reset()
    assert destinations.effects() == [] and destinations.requests() == []
    response = post(destinations, "tickets", TICKET, "key-1")
    assert response.status_code == 201 and "Idempotent-Replayed" not in response.headers
    assert response.json()["id"] == "tkt_0001"  # numbering restarts too
