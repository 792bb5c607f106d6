"""`reproduce` on a team's own HAR of the helpdesk API (examples/openapi/helpdesk.yaml): a lost answer to POST
/api/v2/tickets, a retry under a fresh key, a lookup by external_id. With the team's configuration the scenario lands
on its destination (the OpenAPI document's routes and names); without one the traffic alone gives the same
inference: the nested ref, the client reference, the singular route name (issue 42, goal 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from harness.incident.model import Exchange, Incident
from harness.incident.reproduce import reproduce
from harness.scenario import load

ROOT = Path(__file__).resolve().parents[2]
HAR = ROOT / "examples" / "helpy-incident.har"
DOCUMENT = ROOT / "examples" / "openapi" / "helpdesk.yaml"
WRONG = "python -m harness.agents.wrong.new_key_per_attempt"
# the team's configuration: their document, the client reference said, the variable their agent reads
PYPROJECT = """\
[project]
name = "helpy-agent"
version = "0.1.0"

[tool.retry-harness]
mode = "events"
destinations.helpy = { openapi = "openapi/helpdesk.yaml", client_reference = "external_id", env = { HELPY_URL = "{url}" } }
intents = [{ intent_id = "printer-on-fire", destination = "helpy", operation = "createTicket", params = { summary = "Printer on fire in room 4.12", queue = "support", external_id = "INC-7731" } }]
"""  # noqa: E501


def harness(cwd: Path, *args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_the_har_is_the_helpdesk_incident() -> None:
    from harness.incident.har import read_har

    incident = read_har(HAR)
    assert [(x.method, x.path, x.status) for x in incident.exchanges] == [
        ("POST", "/api/v2/tickets", None), ("POST", "/api/v2/tickets", 201), ("GET", "/api/v2/tickets", 200)]
    assert incident.exchanges[0].headers["idempotency-key"] != incident.exchanges[1].headers["idempotency-key"]


def test_with_the_project_the_scenario_names_the_configured_destination(tmp_path: Path) -> None:
    (tmp_path / "openapi").mkdir()
    shutil.copy(DOCUMENT, tmp_path / "openapi" / "helpdesk.yaml")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    done = harness(tmp_path, "reproduce", HAR, "-o", "incidents/helpy.yaml")
    assert done.returncode == 0, done.stderr
    assert "run it in" in done.stdout
    written = tmp_path / "incidents" / "helpy.yaml"
    data = yaml.safe_load(written.read_text())
    assert data["destinations"] == {"helpy": {
        "openapi": {"document": "../openapi/helpdesk.yaml", "client_reference": "external_id"},
        "agent_env": {"HELPY_URL": "{url}"}}}
    assert "agent_log" not in data  # the project's mode applies where it runs
    (intent,) = data["intents"]
    assert intent == {"intent_id": "printer-on-fire", "kind": "create_ticket", "destination": "helpy",
                      "params": {"summary": "Printer on fire in room 4.12", "queue": "support",
                                 "external_id": "INC-7731"}}
    (fault,) = data["faults"]
    assert fault["match"] == {"destination": "helpy", "method": "POST", "path": "/api/v2/tickets", "nth": 1}
    assert fault["action"] == "drop_response_after_commit"
    scenario = load(written)  # it loads: the document read from the scenario's folder
    api = scenario.destinations["helpy"].api
    assert api is not None and api.routes["create_ticket"].effect_ref == "body.ticket.id"
    assert "hsk_live" not in written.read_text()  # the Authorization header never reaches it


def test_the_project_can_be_named_or_left_out(tmp_path: Path) -> None:
    project = tmp_path / "team"
    (project / "openapi").mkdir(parents=True)
    shutil.copy(DOCUMENT, project / "openapi" / "helpdesk.yaml")
    (project / "pyproject.toml").write_text(PYPROJECT)
    named = harness(tmp_path, "reproduce", HAR, "-o", "named.yaml", "--project", project / "pyproject.toml")
    assert named.returncode == 0, named.stderr
    assert list(yaml.safe_load((tmp_path / "named.yaml").read_text())["destinations"]) == ["helpy"]
    assert load(tmp_path / "named.yaml").destinations["helpy"].api is not None
    inferred = harness(project, "reproduce", HAR, "-o", "inferred.yaml", "--no-project")
    assert inferred.returncode == 0, inferred.stderr
    assert list(yaml.safe_load((project / "inferred.yaml").read_text())["destinations"]) == ["helpy.example"]


def test_without_a_project_the_traffic_gives_the_same_inference(tmp_path: Path) -> None:
    done = harness(tmp_path, "reproduce", HAR, "-o", "incident.yaml")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "incident.yaml").read_text()
    data = yaml.safe_load(text)
    (api,) = (d["api"] for d in data["destinations"].values())
    assert api["client_reference_field"] == "external_id"
    assert "client_reference_field: external_id: the value a write sent in it was later the query param" in text
    assert "effect_ref: body.ticket.id" in text  # the choice said, never silent
    create = api["routes"]["create_ticket"]
    assert create["effect_ref"] == "body.ticket.id" and create["resource"] == "ticket"
    assert create["response"]["body"]["ticket"]["id"] == "{id}"  # a new ticket each time, not the incident's
    assert create["response"]["body"]["ticket"]["summary"] == "{params.summary}"
    assert api["routes"]["find_ticket"]["result_field"] == "tickets"
    assert "create_tickets" not in text
    assert data["intents"][0]["params"]["external_id"] == "INC-7731"
    assert "hsk_live" not in text

    ran = harness(tmp_path, "run", "incident.yaml", "--evidence-dir", tmp_path / "evidence", timeout=240)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "H033" not in ran.stdout
    wrong = harness(tmp_path, "run", "incident.yaml", "--agent", WRONG, "--evidence-dir", tmp_path / "evidence",
                    timeout=240)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "FAIL H002" in wrong.stdout


def test_a_scenario_may_name_an_openapi_document(tmp_path: Path) -> None:
    shutil.copy(DOCUMENT, tmp_path / "helpdesk.yaml")
    scenario = {"name": "from_openapi", "description": "x",
                "destinations": {"helpy": {"openapi": "helpdesk.yaml"}},
                "intents": [{"intent_id": "t1", "kind": "create_ticket", "destination": "helpy",
                             "params": {"summary": "s", "queue": "ops", "external_id": "E-1"}}]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    api = load(tmp_path / "s.yaml").destinations["helpy"].api
    assert api is not None and api.client_reference_field == "external_id"
    scenario["destinations"] = {"helpy": {"openapi": {"document": "helpdesk.yaml", "lookup_param": "nope"}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    from harness.errors import ScenarioError

    try:
        load(tmp_path / "s.yaml")
    except ScenarioError as exc:
        assert "lookup_param" in str(exc) and "external_id" in str(exc)
    else:
        raise AssertionError("an override the document refutes must be an error")


def _exchange(body: dict[str, object], answer: dict[str, object] | None) -> Exchange:
    return Exchange(destination="api.example:443", method="POST", path="/v1/orders",
                    headers={"content-type": "application/json"}, body=json.dumps(body).encode(),
                    status=None if answer is None else 201, error="Server disconnected." if answer is None else None,
                    response_body=b"" if answer is None else json.dumps(answer).encode())


def test_the_id_that_differs_is_the_ref_and_a_reference_by_name_is_said(tmp_path: Path) -> None:
    """Two answers: the field that changes between them names the new resource (``order.number`` here, beside an
    ``id`` that is the customer's); an integer id gives an integer template; a field named like a client reference
    with no lookup to prove it is kept, and the header says so."""
    first = {"order": {"id": "cus_1", "order_id": 1001, "note": "x"}}
    second = {"order": {"id": "cus_1", "order_id": 1002, "note": "x"}}
    incident = Incident(source="orders.har", format="har", exchanges=[
        _exchange({"item": "lamp", "client_reference_id": "ref-9"}, None),
        _exchange({"item": "lamp", "client_reference_id": "ref-9"}, first),
        _exchange({"item": "desk", "client_reference_id": "ref-10"}, second),
    ])
    text = reproduce(incident)
    data = yaml.safe_load(text)
    api = data["destinations"]["api.example"]["api"]
    route = api["routes"]["create_order"]
    assert route["effect_ref"] == "body.order.order_id" and route["id_type"] == "integer"
    assert route["response"]["body"]["order"]["order_id"] == "{id}"
    assert api["client_reference_field"] == "client_reference_id"
    assert "client_reference_field: client_reference_id: named like a client reference" in text
    assert "body.order.order_id: it differs across the answers seen" in text
    (tmp_path / "orders.yaml").write_text(text)
    assert [i.params["client_reference_id"] for i in load(tmp_path / "orders.yaml").intents] == ["ref-9", "ref-10"]
