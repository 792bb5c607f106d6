"""DestinationSpec validation and the agent-facing contract ``describe``."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pydantic
import pytest

from fake_destinations.services import API_SERVICE, MCP_SERVICE, SERVICES
from fake_destinations.spec import DestinationSpec, describe, json_schema
from harness.contract import DestinationContract


def test_service_defaults_are_filled_in():
    spec = DestinationSpec(service="vms")
    assert spec.idempotency == "client_token" and spec.lookup == "client_reference"
    assert DestinationSpec(service="email").lookup == "none"
    assert DestinationSpec(service="tickets", idempotency="none").idempotency == "none"


def test_describe_tickets_is_the_documented_shape():
    assert describe({"service": "tickets"}).to_dict() == {
        "service": "tickets",
        "idempotency": {"style": "stripe", "header": "Idempotency-Key", "body_field": None,
                        "retention_seconds": 86400.0, "scope": "global", "required": False},
        "lookup": {"method": "GET", "path": "/tickets", "query_param": "client_reference",
                   "result_field": "items", "lag_seconds": 0.0},
        "operations": {"create_ticket": {"method": "POST", "path": "/tickets",
                                         "client_reference_field": "client_reference",
                                         "effect_ref_field": "id", "required_params": ["title", "project"]}},
    }


def test_describe_other_styles():
    vms = describe(DestinationSpec(service="vms")).idempotency
    assert vms.header is None and vms.body_field == "client_token"
    email = describe({"service": "email"})
    assert email.lookup is None and email.idempotency.retention_seconds is None
    deployments = describe({"service": "deployments"})
    assert deployments.to_dict()["status"] == {"method": "GET", "path": "/operations/{id}"}
    assert deployments.idempotency.required is True
    accounts = describe({"service": "accounts", "key_scope": "account", "idempotency": "stripe"})
    assert accounts.to_dict()["operations"]["disable_account"]["body_defaults"] == {"status": "disabled"}
    assert accounts.to_dict()["idempotency"]["account_header"] == "X-Account"
    assert describe({"service": "ssh"}).to_dict()["operations"]["create_user"] == {
        "method": "EXEC", "command": "create-user {username}", "required_params": ["username"],
        "family": "set_state", "convergence": "exits 9 without acting when the user already exists",
        "convergence_exit_status": 9}
    families = {k: v.get("family") for k, v in describe({"service": "ssh"}).to_dict()["operations"].items()}
    assert families == {"create_user": "set_state", "install_key": "append", "restart_service": "destructive",
                        "deploy_release": "set_state"}
    assert describe({"service": "tickets", "lookup_lag_seconds": 2}).lookup.may_lag


@pytest.mark.parametrize("service, idempotency, key_scope", [
    # api and mcp declare their contracts: test_api_spec, test_mcp
    (service, idempotency, key_scope) for service in sorted(SERVICES) if service not in (API_SERVICE, MCP_SERVICE)
    for idempotency in ([None, "none"] if SERVICES[service].transport == "ssh" else
                        [None, "none", "stripe", "ietf", "client_token"])
    for key_scope in ("global", "account")])
def test_the_contract_json_reads_back_to_the_same_contract(service, idempotency, key_scope):
    contract = describe(DestinationSpec(service=service, idempotency=idempotency, key_scope=key_scope))
    as_json = json.loads(json.dumps(contract.to_dict()))
    assert DestinationContract.from_dict(as_json) == contract
    assert DestinationContract.from_dict(as_json).to_dict() == as_json


def test_every_service_declares_operations_with_unique_kinds():
    kinds = [op.kind for s in SERVICES.values() for op in s.operations]
    assert len(kinds) == len(set(kinds))
    assert {"create_ticket", "disable_account", "create_payment", "deliver_webhook", "run_instance",
            "send_email", "create_deployment"} <= set(kinds)


@pytest.mark.parametrize("bad, message", [
    ({"service": "tickts"}, "Input should be 'tickets'"),
    ({"service": "tickets", "idempotency": "stripey"}, "'none', 'stripe', 'ietf' or 'client_token'"),
    ({"service": "tickets", "retention": 5}, "Extra inputs are not permitted"),
    ({"service": "tickets", "failures": [{"at": 0, "fault": "error_before_commit"}]}, "greater than or equal to 1"),
    ({"service": "tickets", "failures": [{"at": 1, "fault": "drop_after_exec"}]},
     "fault 'drop_after_exec' is not available for service 'tickets'"),
    ({"service": "ssh", "idempotency": "stripe"}, "not available for service 'ssh'"),
    ({"service": "tickets", "put_notifies": True}, "put_notifies applies to service 'accounts' only"),
    ({"service": "tickets", "rate_limit": {"max_requests": 1}}, "per_seconds"),
])
def test_bad_specs_name_the_key_and_the_valid_choices(bad, message):
    with pytest.raises(pydantic.ValidationError) as caught:
        DestinationSpec.model_validate(bad)
    assert message in str(caught.value)


def test_service_choices_are_the_catalogue():
    assert typing.get_args(DestinationSpec.model_fields["service"].annotation) == tuple(SERVICES)
    assert json_schema()["properties"]["service"]["enum"] == list(SERVICES)


def _table_rows(text: str, first_header: str) -> list[list[str]]:
    """The body rows of the markdown table whose header starts with ``| first_header |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


@pytest.mark.parametrize("doc", ["docs/destinations-and-faults.md", "docs/destinations.md"])
def test_the_service_tables_in_the_docs_are_the_catalogue(doc):
    rows = _table_rows((Path(__file__).resolve().parents[2] / doc).read_text(), "service")
    assert [row[0] for row in rows] == [f"`{name}`" for name in SERVICES]
    for (name, kinds, idempotency, lookup, *_), service in zip(rows, SERVICES.values(), strict=True):
        assert idempotency == f"`{service.idempotency}`", name
        assert (lookup == "none") == (service.lookup == "none"), name
        assert all(f"`{op.kind}`" in kinds for op in service.operations), name


def test_json_schema_documents_every_option():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name


def test_package_exports_are_complete_and_lazy():
    import subprocess
    import sys
    from pathlib import Path

    import fake_destinations

    for name in fake_destinations.__all__:
        assert getattr(fake_destinations, name) is not None, name
    assert fake_destinations.__all__ == sorted(fake_destinations.__all__)
    # the destination process imports the package: it must not drag pydantic in
    probe = "import sys, fake_destinations.http, fake_destinations.ssh; print('pydantic' in sys.modules)"
    root = str(Path(fake_destinations.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                         cwd=root)
    assert out.stdout.strip() == "False"
