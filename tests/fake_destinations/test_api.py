"""The generic destination (`api:`): declarations validated with errors naming the key, and served by a real
destination process (real HTTP on loopback, the real SQLite ledger)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest
import requests
import yaml

from fake_destinations import DestinationHost, read_effects, read_requests
from fake_destinations.spec import DestinationSpec, describe, load_destination
from harness.contract import DestinationContract
from harness.errors import ScenarioError
from harness.resources import api_profile, api_profiles
from harness.scenario import API_SCHEMA_PATH, api_schema_text, load

# EC2-like: the AWS query protocol (form body with Action=), a ClientToken, XML answers and errors
EC2 = {
    "request_format": "aws_query",
    "idempotency": {"style": "client_token", "field": "ClientToken"},
    "routes": {"run_instances": {
        "method": "POST", "path": "/", "match": {"Action": "RunInstances"}, "commits": "instance_launched",
        "id_format": "i-{n:017x}", "required": ["ImageId"],
        "response": {"body": (
            '<RunInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            "<requestId>{request_id}</requestId><instancesSet><item><instanceId>{id}</instanceId>"
            "<imageId>{params.ImageId}</imageId></item></instancesSet></RunInstancesResponse>")},
        "effect_ref": "body.instancesSet.item.instanceId"},
        "describe_instances": {"method": "POST", "path": "/", "match": {"Action": "DescribeInstances"},
                               "response": {"body": "<DescribeInstancesResponse/>"}}},
}
# Stripe-like: form bodies, a key header, errors as Stripe writes them, a header on every error
STRIPE = {
    "request_format": "form",
    "client_reference_field": "metadata[order_id]",
    "idempotency": {"style": "stripe", "mismatch_status": 400, "mismatch_code": "idempotency_error",
                    "account_header": "Stripe-Account"},
    "errors": {"body": {"error": {"type": "api_error", "code": "{code}", "message": "{message}"}},
               "headers": {"Stripe-Should-Retry": "false"}},
    "routes": {
        "create_payment_intent": {
            "method": "POST", "path": "/v1/payment_intents", "commits": "payment_intent_created",
            "id_format": "pi_{n:06d}", "required": ["amount", "currency"],
            "response": {"headers": {"Request-Id": "req_{n}"}, "body": {
                "id": "{id}", "object": "payment_intent", "amount": "{params.amount:d}",
                "currency": "{params.currency}", "metadata": {"order_id": "{params.metadata[order_id]}"}}},
            "effect_ref": "body.id"},
        "get_payment_intent": {"method": "GET", "path": "/v1/payment_intents/{id}",
                               "reads": "create_payment_intent"},
        "search": {"method": "GET", "path": "/v1/payment_intents/search", "lookup": "create_payment_intent",
                   "query_param": "order", "result_field": "data"},
        "balance": {"method": "GET", "path": "/v1/balance", "response": {"body": {"object": "balance"}}},
    },
}
# Lambda-like: a JSON invoke that commits, its ref in a header only
LAMBDA = {
    "routes": {"invoke": {
        "method": "POST", "path": "/2015-03-31/functions/{name}/invocations", "commits": "function_invoked",
        "response": {"headers": {"X-Amzn-RequestId": "{id}"}, "body": {"ok": True}},
        "effect_ref": "header.X-Amzn-RequestId"}},
}

HOSTED = {
    "ec2": {"api": EC2},
    "ec2_failing": {"api": EC2, "failures": [{"at": 1, "fault": "error_after_commit", "status": 500}]},
    "stripe": {"api": STRIPE, "key_scope": "account",
               "failures": [{"at": 3, "fault": "error_after_commit", "status": 500,
                             "headers": {"Stripe-Should-Retry": "true"}}]},
    "lambda": {"api": LAMBDA, "processing_delay_seconds": 0.6},
    "orders": {"api": "orders"},
}


@pytest.fixture(scope="module")
def api_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DestinationHost]:
    folder = tmp_path_factory.mktemp("api-destinations")
    with DestinationHost(HOSTED, folder / "ledger.sqlite", log_path=folder / "destinations.log") as host:
        yield host


@pytest.fixture
def api(api_host: DestinationHost) -> DestinationHost:
    api_host.reset()
    return api_host


def effects_of(host: DestinationHost, destination: str) -> list[dict[str, Any]]:
    return [e for e in read_effects(host.ledger_path) if e["destination"] == destination]


# -- serving ---------------------------------------------------------------------------------------

def test_an_aws_query_api_answers_xml_and_dedups_on_the_client_token(api: DestinationHost) -> None:
    url = api.urls["ec2"] + "/"
    form = {"Action": "RunInstances", "Version": "2016-11-15", "ImageId": "ami-<&>\"", "ClientToken": "tok-1"}
    first = requests.post(url, data=form, timeout=5)
    assert first.status_code == 200 and first.headers["Content-Type"].startswith("text/xml")
    root = ElementTree.fromstring(first.text)  # the param's <&>" was escaped: it parses, and reads back
    ns = {"ec2": "http://ec2.amazonaws.com/doc/2016-11-15/"}
    assert root.find("ec2:instancesSet/ec2:item/ec2:imageId", ns).text == 'ami-<&>"'  # type: ignore[union-attr]
    instance = root.find("ec2:instancesSet/ec2:item/ec2:instanceId", ns).text  # type: ignore[union-attr]
    assert instance == "i-00000000000000001"

    again = requests.post(url, data=form, timeout=5)  # same token, same params: the same instance, no new effect
    assert again.status_code == 200 and instance in again.text and "Idempotent-Replayed" not in again.headers
    other = requests.post(url, data={**form, "ImageId": "ami-2"}, timeout=5)
    assert other.status_code == 400
    assert ElementTree.fromstring(other.text).find("Errors/Error/Code").text == "IdempotentParameterMismatch"  # type: ignore[union-attr]
    assert requests.post(url, data={"Action": "DescribeInstances"}, timeout=5).text == "<DescribeInstancesResponse/>"
    unknown = requests.post(url, data={"Action": "TerminateInstances"}, timeout=5)
    assert unknown.status_code == 400 and "Action=RunInstances" in unknown.text

    assert [e["effect_ref"] for e in effects_of(api, "ec2")] == [instance]
    rows = [r for r in read_requests(api.ledger_path) if r["destination"] == "ec2"]
    assert [(r["kind"], r["outcome"], r["idempotency_key"]) for r in rows[:3]] == [
        ("run_instances", "committed", "tok-1"), ("run_instances", "replayed", "tok-1"),
        ("run_instances", "rejected", "tok-1")]
    assert json.loads(rows[0]["params"])["ImageId"] == 'ami-<&>"'


def test_a_client_token_retried_after_a_failure_after_commit_gets_the_resource(api: DestinationHost) -> None:
    """EC2 remembers the instance a token launched, not the error the client saw: the retry succeeds, with no
    second instance (a Stripe-like key replays the error instead: test_semantics)."""
    url = api.urls["ec2_failing"] + "/"
    form = {"Action": "RunInstances", "ImageId": "ami-1", "ClientToken": "tok-9"}
    first = requests.post(url, data=form, timeout=5)
    assert first.status_code == 500 and "<Code>internal_error</Code>" in first.text
    again = requests.post(url, data=form, timeout=5)
    assert again.status_code == 200 and "<instanceId>i-00000000000000001</instanceId>" in again.text
    assert [e["effect_ref"] for e in effects_of(api, "ec2_failing")] == ["i-00000000000000001"]


def test_a_form_api_replays_its_answer_with_its_headers_and_says_its_errors_its_way(api: DestinationHost) -> None:
    url = api.urls["stripe"] + "/v1/payment_intents"
    form = {"amount": "1999", "currency": "eur", "metadata[order_id]": "o-7"}
    headers = {"Idempotency-Key": "k-1", "Stripe-Account": "acct_1"}
    first = requests.post(url, data=form, headers=headers, timeout=5)
    assert first.status_code == 200
    body = first.json()
    assert body == {"id": "pi_000001", "object": "payment_intent", "amount": 1999, "currency": "eur",
                    "metadata": {"order_id": "o-7"}}
    replay = requests.post(url, data=form, headers=headers, timeout=5)
    assert replay.json() == body and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.headers["Request-Id"] == first.headers["Request-Id"] == "req_1"
    # the key is scoped per account: another account's same key is another request (the 3rd write: it
    # commits, then the declared failure answers 500 with the header the failure declares)
    failed = requests.post(url, data=form, headers={**headers, "Stripe-Account": "acct_2"}, timeout=5)
    assert failed.status_code == 500 and failed.headers["Stripe-Should-Retry"] == "true"
    assert failed.json() == {"error": {"type": "api_error", "code": "internal_error",
                                       "message": "the destination failed"}}
    mismatch = requests.post(url, data={**form, "amount": "1"}, headers=headers, timeout=5)
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == "idempotency_error"
    assert mismatch.headers["Stripe-Should-Retry"] == "false"
    missing = requests.post(url, data={"amount": "5"}, timeout=5)
    assert missing.status_code == 400 and "currency" in missing.json()["error"]["message"]

    base = api.urls["stripe"]
    assert requests.get(f"{base}/v1/payment_intents/pi_000001", timeout=5).json() == body
    assert requests.get(f"{base}/v1/payment_intents/pi_999", timeout=5).status_code == 404
    found = requests.get(f"{base}/v1/payment_intents/search", params={"order": "o-7"}, timeout=5).json()
    assert [item["id"] for item in found["data"]] == ["pi_000001", "pi_000002"]
    assert requests.get(f"{base}/v1/balance", timeout=5).json() == {"object": "balance"}
    assert requests.delete(url, timeout=5).status_code == 405
    assert [e["effect_ref"] for e in effects_of(api, "stripe")] == ["pi_000001", "pi_000002"]
    assert effects_of(api, "stripe")[0]["client_reference"] == "o-7"


def test_an_effect_ref_in_a_header_and_a_slow_write_that_holds_its_key(api: DestinationHost) -> None:
    url = api.urls["lambda"] + "/2015-03-31/functions/fn/invocations"
    first = requests.post(url, json={"x": 1}, timeout=5)
    assert first.json() == {"ok": True}
    ref = first.headers["X-Amzn-RequestId"]
    assert [e["effect_ref"] for e in effects_of(api, "lambda")] == [ref]
    requests.post(url, json={"x": 1}, timeout=5)  # no idempotency: a second invocation is a second effect
    assert len(effects_of(api, "lambda")) == 2
    row = [r for r in read_requests(api.ledger_path) if r["destination"] == "lambda"][0]
    assert json.loads(row["params"]) == {"name": "fn", "x": 1}


def test_the_bundled_orders_profile_serves_the_contract_it_describes(api: DestinationHost) -> None:
    contract = describe(load_destination({"api": "orders"}))
    assert contract.service == "api" and contract.idempotency.header == "Idempotency-Key"
    assert contract.lookup is not None and contract.lookup.path == "/orders"
    op = contract.operations["create_order"]
    url = api.urls["orders"] + op.path
    answer = requests.post(url, json={"item": "book", "quantity": 2, "client_reference": "c-1"},
                           headers={contract.idempotency.header: "k"}, timeout=5)
    assert answer.status_code == 201
    ref = answer.json()[op.effect_ref_field]
    found = requests.get(api.urls["orders"] + contract.lookup.path, params={contract.lookup.query_param: "c-1"},
                         timeout=5).json()[contract.lookup.result_field]
    assert [item["id"] for item in found] == [ref]


# -- the contract the agent reads ------------------------------------------------------------------

@pytest.mark.parametrize("declaration", [EC2, STRIPE, LAMBDA, "orders"])
def test_an_api_contract_reads_back_to_the_same_contract(declaration: Any) -> None:
    contract = describe(load_destination({"api": declaration}))
    as_json = json.loads(json.dumps(contract.to_dict()))
    assert DestinationContract.from_dict(as_json) == contract
    assert contract.service == "api"


def test_the_contract_says_where_the_key_travels_and_the_effect_ref_shows() -> None:
    ec2 = describe(DestinationSpec.model_validate({"api": EC2}))
    assert (ec2.idempotency.style, ec2.idempotency.body_field, ec2.idempotency.header) == (
        "client_token", "ClientToken", None)
    assert list(ec2.operations) == ["run_instances"]  # routes that commit: the intent kinds
    assert ec2.operations["run_instances"].effect_ref_field == "instancesSet.item.instanceId"
    stripe = describe(DestinationSpec.model_validate({"api": STRIPE, "key_scope": "account"}))
    assert stripe.idempotency.account_header == "Stripe-Account"
    assert stripe.operations["create_payment_intent"].client_reference_field == "metadata[order_id]"
    assert describe(DestinationSpec.model_validate({"api": LAMBDA})).operations["invoke"].effect_ref_field is None


# -- bad declarations ------------------------------------------------------------------------------

SCENARIO = """\
name: generic
description: a generic destination
destinations:
  shop:
    api:
      request_format: json
      routes:
        create_order:
          method: POST
          path: /orders
          commits: order_created
          response:
            body: {{id: "{{id}}", status: placed}}
          effect_ref: body.id
{extra}intents:
  - intent_id: i1
    kind: create_order
    destination: shop
"""


def error_of(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load(path)
    return str(caught.value)


def test_a_good_declaration_loads_and_its_intent_kind_is_a_route(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(extra=""))
    scenario = load(path)
    assert scenario.destinations["shop"].service == "api"
    path.write_text(SCENARIO.format(extra="").replace("kind: create_order", "kind: create_ordr"))
    message = error_of(tmp_path, path.read_text())
    assert "unknown operation kind for 'shop' 'create_ordr'; did you mean 'create_order'?" in message


@pytest.mark.parametrize("old, new, where, says", [
    ("          effect_ref: body.id", "          effect_ref: body.id\n          retries: 3",
     ":15: destinations.shop.api.routes.create_order.retries", "unknown key 'retries'"),
    ("path: /orders", "path: /orders/{id", ":10: destinations.shop.api.routes.create_order.path",
     "'/orders/{id': path template '/orders/{id' does not parse"),
    ("effect_ref: body.id", "effect_ref: body.order.id", ":14: destinations.shop.api",
     "routes.create_order.effect_ref 'body.order.id' matches nothing in the declared response body"),
    ("effect_ref: body.id", "effect_ref: body.status", ":14: destinations.shop.api",
     "holds 'placed' in the declared response, not the new resource's {id}"),
    ("effect_ref: body.id", "effect_ref: id", ":14: destinations.shop.api",
     "give body.<dotted path> (e.g. body.id) or header.<Name>"),
    ("request_format: json", "request_format: xml", ":6: destinations.shop.api.request_format",
     "'xml' is not valid (valid: 'json', 'form' or 'aws_query')"),
    ("request_format: json", "request_format: json\n      idempotency: {style: client_token, header: X-Key}",
     ":7: destinations.shop.api.idempotency", "header 'X-Key' carries a key only for style stripe or ietf"),
    ("request_format: json", "request_format: json\n      idempotency: {style: none, mismatch_status: 400}",
     ":7: destinations.shop.api.idempotency", "style 'none' has no keys"),
    ("method: POST", "method: FETCH", ":9: destinations.shop.api.routes.create_order.method",
     "method 'FETCH' is not one of GET, POST, PUT, PATCH, DELETE"),
    ('body: {id: "{id}", status: placed}', 'body: {id: "{id}", at: "{when}"}', ":13: destinations.shop.api",
     "unknown placeholder {when}; valid: {id}, {n}, {now}, {request_id}, {key}, {params.NAME}"),
    ('body: {id: "{id}", status: placed}', 'body: {id: "{id:d}"}', ":13: destinations.shop.api",
     "format spec 'd' of {id} does not apply to a string"),
    ('body: {id: "{id}", status: placed}', 'body: "<order><id>{id}</order>"', ":13: destinations.shop.api",
     "the XML body does not parse"),
])
def test_a_bad_declaration_names_the_line_the_key_the_value_and_what_is_valid(
        tmp_path: Path, old: str, new: str, where: str, says: str) -> None:
    text = SCENARIO.format(extra="")
    assert old in text
    message = error_of(tmp_path, text.replace(old, new))
    assert f"s.yaml{where}" in message and says in message, message


@pytest.mark.parametrize("extra, says", [
    ("        find:\n          method: GET\n          path: /orders\n          lookup: create_order\n",
     "a lookup searches by client reference, and the api declares no client_reference_field"),
    ("        get:\n          method: GET\n          path: /orders/{id}\n          reads: get_order\n",
     "routes.get.reads: 'get_order' is not a route that commits (valid: create_order)"),
    ("        get:\n          method: GET\n          path: /orders\n          reads: create_order\n",
     "a reads route names the resource by {id} in its path"),
    ("        again:\n          method: POST\n          path: /orders\n",
     "routes 'create_order' and 'again' both match POST /orders"),
    ("        both:\n          method: GET\n          path: /x/{id}\n          reads: create_order\n"
     "          lookup: create_order\n", "a route either commits, reads or looks up; it declares reads and lookup"),
])
def test_a_route_that_contradicts_another_is_an_error(tmp_path: Path, extra: str, says: str) -> None:
    text = SCENARIO.format(extra="").replace("          effect_ref: body.id\n",
                                             "          effect_ref: body.id\n" + extra)
    assert says in error_of(tmp_path, text)


@pytest.mark.parametrize("extra, says", [
    ("    idempotency: stripe\n", "an api destination declares its style under api.idempotency.style"),
    ("    key_scope: account\n", "no route of this api takes one"),
    ("    lookup_lag_seconds: 2\n", "this api declares no lookup route"),
    ("    service: tickets\n", "service 'tickets' takes no `api:`"),
])
def test_destination_options_that_contradict_the_api_are_errors(tmp_path: Path, extra: str, says: str) -> None:
    text = SCENARIO.format(extra="").replace("    api:\n", extra + "    api:\n")
    assert says in error_of(tmp_path, text)


def test_a_profile_name_or_a_relative_file_and_their_errors(tmp_path: Path) -> None:
    text = SCENARIO.format(extra="")
    head, _, rest = text.partition("    api:\n")
    tail = rest[rest.index("intents:"):]
    declaration = rest[:rest.index("intents:")]
    (tmp_path / "apis").mkdir()
    (tmp_path / "apis" / "shop.yaml").write_text(
        "\n".join(line[6:] for line in declaration.splitlines()) + "\n")
    good = tmp_path / "good.yaml"
    good.write_text(head + "    api: apis/shop.yaml\n" + tail)
    assert list(load(good).destinations["shop"].api.routes) == ["create_order"]  # type: ignore[union-attr]

    (tmp_path / "apis" / "shop.yaml").write_text(
        (tmp_path / "apis" / "shop.yaml").read_text().replace("method: POST", "method: POST\n    verb: POST"))
    message = error_of(tmp_path, good.read_text())
    assert f"in the api declaration {tmp_path / 'apis' / 'shop.yaml'}:" in message
    assert "shop.yaml:5: routes.create_order.verb: unknown key 'verb'" in message

    message = error_of(tmp_path, head + "    api: strip\n" + tail)
    assert "no bundled API profile 'strip' (bundled: " in message and "orders" in message
    message = error_of(tmp_path, head + "    api: apis/missing.yaml\n" + tail)
    assert "missing.yaml: cannot read" in message


def test_validating_reads_no_file_the_loader_does(tmp_path: Path) -> None:
    """An `api:` name or path is read by the loader (load_destination, harness.scenario.load), never by a validator."""
    with pytest.raises(pydantic.ValidationError, match="names a file, which the loader reads before validation"):
        DestinationSpec.model_validate({"api": "orders"})
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(LAMBDA))
    assert load_destination({"api": "mine.yaml"}, tmp_path) == DestinationSpec.model_validate({"api": LAMBDA})
    with pytest.raises(pydantic.ValidationError, match="no bundled API profile 'strip'"):
        load_destination({"api": "strip"})


def test_bad_specs_raise_validation_errors_outside_a_file_too() -> None:
    with pytest.raises(pydantic.ValidationError, match="needs an `api:` declaration"):
        DestinationSpec.model_validate({"service": "api"})
    with pytest.raises(pydantic.ValidationError, match="failures\\[\\].headers apply to api destinations"):
        DestinationSpec.model_validate({"service": "tickets", "failures": [
            {"at": 1, "fault": "error_after_commit", "headers": {"X": "1"}}]})


# -- the published schema --------------------------------------------------------------------------

def test_the_api_schema_file_is_up_to_date_and_every_bundled_profile_validates() -> None:
    assert API_SCHEMA_PATH.read_text() == api_schema_text(), "run: python -m harness.scenario"
    schema = json.loads(API_SCHEMA_PATH.read_text())
    assert api_profiles(), "the package ships API profiles"
    for name in api_profiles():
        path = api_profile(name)
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
        assert "$schema=../schemas/api.schema.json" in path.read_text().splitlines()[0], name
        describe(load_destination({"api": name}))


def test_the_documented_declarations_are_valid() -> None:
    """docs/destinations.md's examples of generic destinations validate as they are written."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "destinations.md").read_text()
    section = text[text.index("## Generic destinations"):text.index("## Controlling destinations")]
    blocks = [b.split("```", 1)[0] for b in section.split("```yaml\n")[1:]]
    assert len(blocks) == 2
    billing = yaml.safe_load(blocks[0])["destinations"]["billing"]
    contract = describe(DestinationSpec.model_validate(billing))
    assert contract.lookup is not None and contract.lookup.path == "/v1/payment_intents/search"
    ec2 = yaml.safe_load("x:\n" + blocks[1])["x"]
    assert describe(DestinationSpec.model_validate(ec2)).operations["run_instances"].method == "POST"


def test_the_readme_declaration_is_valid() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "destinations-and-faults.md").read_text()
    block = text[text.index("## Any API: generic destinations"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    shop = yaml.safe_load(block)["destinations"]["shop"]
    contract = describe(DestinationSpec.model_validate(shop))
    assert list(contract.operations) == ["create_order"] and contract.lookup is not None
