"""OpenAPI documents read into api declarations (harness.openapi): what each real document infers, every
inference said, overrides, the profile printed for review, and bad documents' errors from files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_destinations.api_spec import ApiSpec
from fake_destinations.spec import DestinationSpec, describe
from harness.openapi import InferredApi, OpenApiError, api_from_openapi, profile_yaml
from tests.openapi.conftest import DOCUMENTS, EXAMPLES, document_schema

HELPDESK = EXAMPLES / "helpdesk.yaml"
PETSTORE = DOCUMENTS / "petstore-expanded.yaml"
ERRORS = Path(__file__).parent / "errors"


def why(inferred: InferredApi, where: str) -> str:
    return next(i.why for i in inferred.inferences if i.where == where)


def test_the_helpdesk_document_infers_its_write_read_lookup_and_key() -> None:
    inferred = api_from_openapi(HELPDESK)
    api = inferred.declaration
    ApiSpec.model_validate(api)
    assert inferred.base_path == api["base_path"] == "/api/v2"
    assert inferred.operations == {"createTicket": "create_ticket", "POST /tickets": "create_ticket"}
    create = api["routes"]["create_ticket"]
    assert (create["method"], create["path"], create["effect_ref"], create["resource"]) == (
        "POST", "/api/v2/tickets", "body.ticket.id", "ticket")
    assert create["required"] == ["summary", "queue", "external_id"] and create["invalid_status"] == 422
    assert why(inferred, "routes.create_ticket.effect_ref").startswith("201 answer schema has `ticket.id` (string)")
    assert api["routes"]["get_ticket"] == {"method": "GET", "path": "/api/v2/tickets/{ticket_id}",
                                           "reads": "create_ticket", "wrap": "ticket"}
    assert api["routes"]["list_tickets"] == {"method": "GET", "path": "/api/v2/tickets", "lookup": "create_ticket",
                                             "query_param": "external_id", "result_field": "tickets"}
    assert api["client_reference_field"] == "external_id"
    assert api["idempotency"] == {"style": "stripe", "header": "Idempotency-Key"}
    assert api["errors"] == {"body": {"error": {"code": "{code}", "message": "{message}"}}}
    assert "accepts whatever credentials" in why(inferred, "security")
    contract = describe(DestinationSpec.model_validate({"api": api}))  # what the agent is told
    assert contract.operations["create_ticket"].effect_ref_field == "ticket.id"
    assert contract.lookup is not None and contract.lookup.path == "/api/v2/tickets"


def test_the_generated_answer_holds_to_the_documents_schema() -> None:
    route = ApiSpec.model_validate(api_from_openapi(HELPDESK).declaration).routes["create_ticket"]
    assert route.response is not None
    body = route.response.body
    assert body["ticket"]["summary"] == "{params.summary}" and body["ticket"]["status"] == "open"
    sample = json.loads(json.dumps(body).replace("{id}", "tkt_1").replace("{params.summary}", "s")
                        .replace("{params.queue}", "ops").replace("{params.external_id}", "e"))
    assert document_schema(HELPDESK, "components", "schemas", "Ticket")(sample["ticket"]) == []


def test_the_petstore_infers_an_integer_id_no_key_and_says_why_there_is_no_lookup() -> None:
    inferred = api_from_openapi(PETSTORE)
    api = inferred.declaration
    assert inferred.base_path == "/api" and api["schema_dialect"] == "openapi-3.0"
    add = api["routes"]["add_pet"]
    assert (add["path"], add["effect_ref"], add["id_type"], add["commits"]) == ("/api/pets", "body.id", "integer",
                                                                                 "pet_created")
    assert "resource" not in add  # the answer is the pet itself
    assert api["routes"]["find_pet_by_id"]["reads"] == "add_pet"
    assert api["idempotency"] == {"style": "none"}
    assert why(inferred, "idempotency") == "no idempotency header declared on POST /pets: every request commits"
    assert not any(r.get("lookup") for r in api["routes"].values())
    assert "GET /pets answers no JSON object (a bare list" in why(inferred, "lookup")
    assert api["errors"]["body"] == {"code": "{status}", "message": "{message}"}  # its Error schema's shape


@pytest.mark.parametrize("document, says", [
    ("webhook-example.yaml", ":5: #/paths: no POST or PUT answers 2xx with an id-like field"),
    ("callback-example.yaml", ":51: #/paths/~1streams/post/callbacks/onData/{$request.query.callbackUrl}~1data/"
                              "post/requestBody/content/application~1json/schema/properties/userData/$ref: $ref "
                              "'#/components/schemas/UserLogData' resolves to nothing"),
])
def test_real_documents_that_cannot_be_served_say_where_and_why(document: str, says: str) -> None:
    with pytest.raises(OpenApiError) as caught:
        api_from_openapi(DOCUMENTS / document)
    assert says in str(caught.value)


@pytest.mark.parametrize("bad", sorted(ERRORS.glob("*.yaml")), ids=lambda p: p.stem)
def test_error_messages_match_their_example_files(bad: Path) -> None:
    """One bad document per file, its expected message beside it (FILE stands for its path)."""
    with pytest.raises(OpenApiError) as caught:
        api_from_openapi(bad)
    assert str(caught.value).replace(str(bad), "FILE") == bad.with_suffix(".txt").read_text().rstrip("\n")


def test_an_error_names_the_configuration_key_first() -> None:
    with pytest.raises(OpenApiError) as caught:
        api_from_openapi(ERRORS / "no_write.yaml", where="pyproject.toml: tool.retry-harness.destinations.h.openapi")
    assert str(caught.value).startswith("pyproject.toml: tool.retry-harness.destinations.h.openapi: ")


# -- overrides ------------------------------------------------------------------------------------------------

def test_overrides_settle_an_ambiguous_id_and_are_said_as_set_in_the_configuration() -> None:
    inferred = api_from_openapi(ERRORS / "ambiguous_id.yaml", {"effect_ref": {"createTicket": "body.data.id"},
                                                               "idempotency": {"style": "ietf", "header": "X-Key"},
                                                               "retention_seconds": 3600})
    route = inferred.declaration["routes"]["create_ticket"]
    assert (route["effect_ref"], route["resource"]) == ("body.data.id", "data")
    assert inferred.declaration["idempotency"] == {"style": "ietf", "header": "X-Key"}
    assert inferred.destination_options == {"retention_seconds": 3600}
    assert why(inferred, "routes.create_ticket.effect_ref") == "set in the configuration"
    assert why(inferred, "destination_options.retention_seconds") == "set in the configuration"


def test_overrides_choose_the_lookup_param_when_the_document_leaves_it_open(tmp_path: Path) -> None:
    text = HELPDESK.read_text().replace("        - name: per_page\n", "        - name: queue\n          in: query\n"
                                        "          schema: {type: string}\n        - name: per_page\n")
    path = tmp_path / "two_filters.yaml"
    path.write_text(text)
    open_ended = api_from_openapi(path)
    assert not any(r.get("lookup") for r in open_ended.declaration["routes"].values())
    assert "candidates: external_id, queue" in why(open_ended, "lookup")
    settled = api_from_openapi(path, {"lookup": "listTickets", "lookup_param": "external_id"})
    assert settled.declaration["routes"]["list_tickets"]["query_param"] == "external_id"


@pytest.mark.parametrize("overrides, says", [
    ({"idempotency": {"style": "sometimes"}}, "idempotency.style: 'sometimes' is not valid (valid: 'none', 'stripe' "
                                              "or 'ietf')"),
    ({"lokup": "listTickets"}, "unknown key 'lokup'; did you mean 'lookup'?"),
    ({"effect_ref": {"createTicket": "body.ticket.nope"}}, "effect_ref.createTicket: 'body.ticket.nope' names no "
                                                           "field of the 201 answer of POST /tickets"),
    ({"writes": ["createTciket"]}, "writes: 'createTciket' name no POST or PUT"),
    ({"lookup": "GET /nothing"}, "lookup: 'GET /nothing' names no GET"),
    ({"lookup_param": "colour"}, "lookup_param: 'colour' is no query param of GET /tickets"),
    ({"retention_seconds": -1}, "retention_seconds: -1: Input should be greater than or equal to 0"),
])
def test_a_bad_override_names_its_key_and_what_is_valid(overrides: dict[str, Any], says: str) -> None:
    with pytest.raises(OpenApiError) as caught:
        api_from_openapi(HELPDESK, overrides, where="retry-harness.toml: destinations.helpy")
    assert says in str(caught.value) and str(caught.value).startswith("retry-harness.toml: destinations.helpy: ")


# -- the profile printed for review ----------------------------------------------------------------------------

@pytest.mark.parametrize("document", [HELPDESK, PETSTORE], ids=lambda p: p.stem)
def test_the_profile_loads_back_to_the_declaration_with_every_inference_commented(document: Path) -> None:
    inferred = api_from_openapi(document)
    text = profile_yaml(inferred, document)
    assert yaml.safe_load(text) == inferred.declaration
    comments = "\n".join(line.strip() for line in text.splitlines() if line.strip().startswith("#"))
    for inference in inferred.inferences:
        assert " ".join(inference.why.split()) in comments, inference


def test_the_profile_puts_an_inference_above_the_key_it_set() -> None:
    lines = profile_yaml(api_from_openapi(HELPDESK), HELPDESK).splitlines()
    at = lines.index("    effect_ref: body.ticket.id")
    assert lines[at - 1].startswith("    # 201 answer schema has `ticket.id` (string)")


# -- fuzzed documents ------------------------------------------------------------------------------------------

def _mutations() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 999), st.text(max_size=8),
                        st.sampled_from(["#/components/schemas/Ticket", "#/nowhere", "3.1.0", "3.0.3", "object",
                                         "string", "Idempotency-Key", "header", "201", "{id}", "$ref"]))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
            ["$ref", "type", "properties", "required", "id", "items", "content", "schema", "allOf", "in", "name",
             "responses", "201", "post", "get", "openapi", "paths", "servers", "url", "enum"]), inner, max_size=3)),
        max_leaves=12)


def _paths_of(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths_of(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths_of(value, (*path, i))
    return out


BASE_DOCUMENT = yaml.safe_load(HELPDESK.read_text())
MUTABLE_PLACES = _paths_of(BASE_DOCUMENT)[1:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(MUTABLE_PLACES), _mutations(), st.booleans()), min_size=1, max_size=4))
def test_a_mutated_document_gives_a_declaration_or_an_openapi_error_never_a_traceback(
        tmp_path: Path, changes: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
    document = json.loads(json.dumps(BASE_DOCUMENT))
    for place, value, delete in changes:
        parent: Any = document
        for part in place[:-1]:
            try:
                parent = parent[part]
            except (KeyError, IndexError, TypeError):
                break
        else:
            try:
                if delete:
                    del parent[place[-1]]
                else:
                    parent[place[-1]] = value
            except (KeyError, IndexError, TypeError):
                pass
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(document))
    try:
        inferred = api_from_openapi(path)
    except OpenApiError:
        return
    ApiSpec.model_validate(inferred.declaration)
    assert yaml.safe_load(profile_yaml(inferred, path)) == inferred.declaration
