"""Documents served: the declaration inferred from each is run by a real destination process (real HTTP on
loopback, the real ledger), and its answers hold to the document's own schemas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from fake_destinations import DestinationHost, read_effects
from harness.openapi import api_from_openapi
from tests.openapi.conftest import DOCUMENTS, EXAMPLES, document_schema

HELPDESK = EXAMPLES / "helpdesk.yaml"
PETSTORE = DOCUMENTS / "petstore-expanded.yaml"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DestinationHost]:
    folder = tmp_path_factory.mktemp("openapi-destinations")
    destinations = {"helpdesk": {"api": api_from_openapi(HELPDESK).declaration},
                    "petstore": {"api": api_from_openapi(PETSTORE).declaration}}
    with DestinationHost(destinations, folder / "ledger.sqlite", log_path=folder / "destinations.log") as host:
        yield host


@pytest.fixture
def host(served: DestinationHost) -> DestinationHost:
    served.reset()
    return served


def effects_of(host: DestinationHost, destination: str) -> list[dict[str, Any]]:
    return [e for e in read_effects(host.ledger_path) if e["destination"] == destination]


def test_the_helpdesk_commits_reads_and_finds_its_ticket_in_the_documents_shapes(host: DestinationHost) -> None:
    url = host.urls["helpdesk"] + "/api/v2/tickets"
    ticket = {"summary": "printer on fire", "queue": "ops", "external_id": "ext-42"}
    created = requests.post(url, json=ticket, headers={"Idempotency-Key": "k-1"}, timeout=5)
    assert created.status_code == 201
    assert document_schema(HELPDESK, "paths", "/tickets", "post", "responses", "201", "content",
                           "application/json", "schema")(created.json()) == []
    body = created.json()["ticket"]
    assert body["summary"] == "printer on fire" and body["queue"] == "ops" and body["external_id"] == "ext-42"
    replay = requests.post(url, json=ticket, headers={"Idempotency-Key": "k-1"}, timeout=5)
    assert replay.json() == created.json() and replay.headers["Idempotent-Replayed"] == "true"
    assert [e["effect_ref"] for e in effects_of(host, "helpdesk")] == [body["id"]]

    read = requests.get(f"{url}/{body['id']}", timeout=5)
    assert read.status_code == 200 and read.json() == {"ticket": body}
    assert document_schema(HELPDESK, "paths", "/tickets/{ticket_id}", "get", "responses", "200", "content",
                           "application/json", "schema")(read.json()) == []
    found = requests.get(url, params={"external_id": "ext-42"}, timeout=5)
    assert found.json() == {"tickets": [body]}  # the tickets themselves, as the document lists them
    assert document_schema(HELPDESK, "paths", "/tickets", "get", "responses", "200", "content",
                           "application/json", "schema")(found.json()) == []
    assert requests.get(url, params={"external_id": "other"}, timeout=5).json() == {"tickets": []}
    assert requests.get(f"{url}/tkt_999", timeout=5).status_code == 404


def test_the_helpdesk_refuses_a_malformed_ticket_as_the_document_says_and_commits_nothing(
        host: DestinationHost) -> None:
    url = host.urls["helpdesk"] + "/api/v2/tickets"
    refused = requests.post(url, json={"summary": "", "queue": "sales", "external_id": "e", "colour": "red"},
                            timeout=5)
    assert refused.status_code == 422  # the document's status for a request it refuses
    error = refused.json()
    assert document_schema(HELPDESK, "components", "schemas", "Error")(error) == []
    message = error["error"]["message"]
    assert "queue: 'sales' is not one of ['support', 'billing', 'ops']" in message
    assert "summary: '' should be non-empty" in message
    assert "'colour' was unexpected" in message
    assert effects_of(host, "helpdesk") == []


def test_the_petstore_answers_an_integer_id_and_reads_the_pet_back(host: DestinationHost) -> None:
    url = host.urls["petstore"] + "/api/pets"
    created = requests.post(url, json={"name": "Rex", "tag": "dog"}, timeout=5)
    assert created.status_code == 200
    pet = created.json()
    assert pet == {"id": 1, "name": "Rex"}
    assert document_schema(PETSTORE, "components", "schemas", "Pet")(pet) == []
    assert requests.get(f"{url}/1", timeout=5).json() == pet
    refused = requests.post(url, json={"tag": 7}, timeout=5)
    assert refused.status_code == 400
    assert document_schema(PETSTORE, "components", "schemas", "Error")(refused.json()) == []
    assert refused.json()["code"] == 400 and "'name' is a required property" in refused.json()["message"]
    assert [e["effect_ref"] for e in effects_of(host, "petstore")] == ["1"]


def test_a_form_api_reads_its_numbers_before_checking_them(tmp_path: Path) -> None:
    declaration = {"request_format": "form", "routes": {"pay": {
        "method": "POST", "path": "/pay", "commits": "paid", "request_schema": {
            "type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer", "minimum": 1}}},
        "response": {"body": {"id": "{id}", "amount": "{params.amount:d}"}}, "effect_ref": "body.id"}}}
    with DestinationHost({"pay": {"api": declaration}}, tmp_path / "ledger.sqlite") as host:
        url = host.urls["pay"] + "/pay"
        assert requests.post(url, data={"amount": "1999"}, timeout=5).json()["amount"] == 1999
        refused = requests.post(url, data={"amount": "0"}, timeout=5)
        assert refused.status_code == 400 and "amount: 0 is less than the minimum of 1" in refused.json()["message"]
