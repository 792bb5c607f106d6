"""A container destination's declaration: what loads, what the agent is told, and the bad declarations, each an
error naming the file, the line, the key, the value and what would be valid (no Docker needed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_destinations.spec import DestinationSpec, describe, load_destination
from harness.errors import ScenarioError
from harness.scenario import load, scenario_json_schema
from harness.strategies import schedules

HEAD = """\
name: team_orders
description: the team's orders service behind the proxy
intents:
  - {intent_id: o1, kind: create_order, destination: orders, params: {item: a, quantity: 1}}
destinations:
  orders:
"""
GOOD = """\
api: orders
image: sample-orders:dev
port: 8080
env: {ORDERS_DB: /data/orders.db}
command: python3 /app/app.py --port 8080
health: {path: /healthz, timeout_seconds: 20}
ledger:
  http: {path: /_effects, rows: items}
  fields: {effect_ref: id, operation_key: idempotency_key, committed_at: committed_at}
"""


def write(tmp_path: Path, destination: str, others: str = "") -> Path:
    """A scenario whose destination `orders` is ``destination`` (its keys, unindented), and ``others`` beside it."""
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(destination), "    ") + textwrap.indent(others, "  "))
    return path


def error_of(tmp_path: Path, destination: str, others: str = "") -> str:
    with pytest.raises(ScenarioError) as caught:
        load(write(tmp_path, destination, others))
    return str(caught.value)


def test_a_container_destination_loads_and_is_told_as_its_contract(tmp_path: Path) -> None:
    scenario = load(write(tmp_path, GOOD))
    spec = scenario.destinations["orders"]
    assert spec.is_container and spec.service == "api" and spec.port == 8080
    assert spec.command == ["python3", "/app/app.py", "--port", "8080"]  # a string splits as a shell would
    assert spec.health is not None and spec.health.path == "/healthz"
    assert spec.effect_kinds() == ["order_created"]
    fake = load_destination({"api": "orders"})
    assert describe(spec) == describe(fake)  # the agent is told the api's contract, as for the fake
    assert DestinationSpec.model_validate(spec.model_dump(mode="json")) == spec  # a dump reads back (context.json)


def test_the_published_schema_takes_a_container_destination(tmp_path: Path) -> None:
    data = yaml.safe_load(write(tmp_path, GOOD).read_text())
    data["destinations"]["orders"]["service"] = "api"  # the published schema asks for it (loading derives it from api:)
    jsonschema.validate(data, scenario_json_schema())


@pytest.mark.parametrize("option, value, hint", [
    ("failures", "[{at: 1, fault: error_after_commit}]", "action replace_status, status 500"),
    ("rate_limit", "{max_requests: 1, per_seconds: 1}", "action synthetic_status, status 429"),
    ("processing_delay_seconds", "1", "action latency or hold_response"),
    ("volatile_fields", "[sent_at]", ""),
    ("put_notifies", "true", ""),
    ("async_completion_seconds", "3", ""),
])
def test_a_fakes_own_behaviour_is_refused_on_a_container_destination(tmp_path: Path, option: str, value: str,
                                                                     hint: str) -> None:
    message = error_of(tmp_path, GOOD + f"{option}: {value}\n")
    line = 6 + GOOD.count("\n") + 1
    assert message.startswith(f"{tmp_path / 's.yaml'}:{line}: destinations.orders.{option}: "), message
    assert f"{option} is a fake destination's own behaviour; image 'sample-orders:dev' is the team's service" in message
    assert hint in message
    assert "(valid on a container destination: service, api, idempotency, lookup, retention_seconds, key_scope, " \
           "lookup_lag_seconds, image, port, env, command, health, database, ledger, agent_env)" in message


def test_a_fakes_default_values_are_no_declaration(tmp_path: Path) -> None:
    """A dumped spec (context.json) holds every field at its default: that is not a fake's option declared."""
    load(write(tmp_path, GOOD + "failures: []\nprocessing_delay_seconds: 0\nput_notifies: false\n"))


@pytest.mark.parametrize("extra, where, said", [
    ("port: 9", "destinations.fake.port", "9: port applies to a container destination, one that declares `image:`"),
    ("ledger: {http: {path: /x}, fields: {effect_ref: id}}", "destinations.fake.ledger",
     "ledger applies to a container destination"),
])
def test_container_options_on_a_fake_are_refused(tmp_path: Path, extra: str, where: str, said: str) -> None:
    message = error_of(tmp_path, GOOD, f"fake:\n  service: tickets\n  {extra}\n")
    assert f": {where}: " in message and said in message, message


@pytest.mark.parametrize("destination, line_key, said", [
    (GOOD.replace("port: 8080\n", ""), "destinations.orders",
     "port: required with image 'sample-orders:dev': the container port the service listens on"),
    ("\n".join(GOOD.splitlines()[:6]) + "\n", "destinations.orders",
     "ledger: required with image 'sample-orders:dev'"),
    (GOOD.replace("port: 8080", "port: 70000"), "destinations.orders.port", "70000: Input should be less than"),
    (GOOD.replace("path: /healthz", "path: healthz"), "destinations.orders.health.path",
     "a path on the service's port starting with '/' (e.g. /healthz), not 'healthz'"),
    (GOOD.replace("{ORDERS_DB: /data/orders.db}", "{1BAD: x}"), "destinations.orders.env",
     "'1BAD' is no environment variable name"),
    (GOOD.replace("{ORDERS_DB: /data/orders.db}", "{PORT: 8080}"), "destinations.orders.env.PORT",
     "8080: Input should be a valid string"),
    (GOOD.replace("http: {path: /_effects, rows: items}", "bogus: 1"), "destinations.orders.ledger.bogus",
     "unknown key 'bogus' (valid keys: http, sql, fields, interval_seconds)"),
    (GOOD.replace("  http: {path: /_effects, rows: items}\n", ""), "destinations.orders.ledger",
     "a ledger probe declares one source"),
    (GOOD.replace("effect_ref: id, ", ""), "destinations.orders.ledger.fields.effect_ref", "required key is missing"),
    (GOOD.replace("operation_key: idempotency_key", "operation: idempotency_key"),
     "destinations.orders.ledger.fields.operation",
     "unknown key 'operation'; did you mean 'operation_key'? (valid keys: effect_ref, kind, operation_key, "
     "client_reference, committed_at, params, flow_id)"),
    (GOOD.replace("http: {path: /_effects, rows: items}",
                  "sql: {query: SELECT 1, engine: mysql, database: /d.db}"),
     "destinations.orders.ledger.sql.engine", "'mysql' is not valid (valid: 'sqlite' or 'postgres')"),
    (GOOD.replace("http: {path: /_effects, rows: items}", "sql: {query: SELECT 1, database: orders.db}"),
     "destinations.orders.ledger.sql", "database: for engine sqlite, the absolute path of the file in the container"),
    (GOOD.replace("http: {path: /_effects, rows: items}",
                  "sql: {query: SELECT 1, container: database, database: /d.db}"),
     "destinations.orders",  # the line is ledger.sql.container's (the sentence names it first)
     "ledger.sql.container: 'database' runs the query in the `database:` container, and this destination "
     "declares none"),
    (GOOD + "database: {image: pg:dev, alias: Not_A_Host}\n", "destinations.orders.database.alias",
     "'Not_A_Host' is no host name"),
    (GOOD.replace("api: orders", "service: ssh"), "destinations.orders",
     "image: a container destination is an HTTP service behind the fault proxy; service 'ssh' is ssh"),
    (GOOD.replace("command: python3 /app/app.py --port 8080", "command: 'python3 \"unclosed'"),
     "destinations.orders.command", "does not split into words"),
])
def test_bad_container_declarations_name_the_key_the_value_and_what_is_valid(
        tmp_path: Path, destination: str, line_key: str, said: str) -> None:
    message = error_of(tmp_path, destination)
    assert f": {line_key}: " in message and said in message, message
    assert message.startswith(f"{tmp_path / 's.yaml'}:"), message


def test_an_api_of_several_effect_kinds_needs_the_kind_field(tmp_path: Path) -> None:
    api = ("api:\n  routes:\n"
           "    a: {method: POST, path: /a, commits: a_made, response: {body: {id: '{id}'}}, effect_ref: body.id}\n"
           "    b: {method: POST, path: /b, commits: b_made, response: {body: {id: '{id}'}}, effect_ref: body.id}\n")
    destination = api + GOOD.replace("api: orders\n", "")
    path = write(tmp_path, destination)
    path.write_text(path.read_text().replace("kind: create_order", "kind: a"))
    with pytest.raises(ScenarioError) as caught:
        load(path)
    assert "destinations.orders: ledger.fields.kind: the contract commits 2 effect kinds (a_made, b_made): name " \
           "the field of a row that says which" in str(caught.value)
    path.write_text(path.read_text().replace("fields: {effect_ref: id,", "fields: {effect_ref: id, kind: kind,"))
    assert load(path).destinations["orders"].effect_kinds() == ["a_made", "b_made"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_exploration_varies_only_the_proxy_and_the_crashes_of_a_team_service(data: st.DataObject) -> None:
    """No schedule drawn over a container destination gives it a fake's option (which it would refuse)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        scenario = load(write(Path(folder), GOOD))
    schedule = data.draw(schedules(scenario))
    assert "orders" not in schedule.destination_options
    assert schedule.apply(scenario).destinations["orders"].is_container  # and it validates
