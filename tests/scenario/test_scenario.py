"""Scenario files: the bundled ones validate, bad ones give errors naming file, line, key and choices."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from harness.errors import ScenarioError
from harness.resources import catalogue_dir
from harness.scenario import load, resolve, scenario_json_schema

REPO = Path(__file__).resolve().parents[2]
GOOD = """\
name: demo
description: one ticket, response lost
destinations:
  tickets:
    service: tickets
faults:
  - id: lose
    match: {destination: tickets, method: POST, path: /tickets, nth: 1}
    action: drop_response_after_commit
intents:
  - intent_id: t1
    kind: create_ticket
    destination: tickets
    params: {title: x, project: OPS}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load(path)
    return str(info.value)


@pytest.mark.parametrize("path", sorted(catalogue_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_scenario_loads_and_validates_against_the_published_schema(path: Path) -> None:
    scenario = load(path)
    assert scenario.name == path.stem
    jsonschema.validate(yaml.safe_load(path.read_text()), scenario_json_schema())


MODELINE = "# yaml-language-server: $schema="


@pytest.mark.parametrize("path", sorted(catalogue_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_scenario_names_its_schema_for_editors_and_the_client_timeout_it_assumes(path: Path) -> None:
    first, *_ = path.read_text().splitlines()
    assert first.startswith(MODELINE), f"{path.name}: line 1 must be the yaml-language-server modeline"
    schema = (path.parent / first[len(MODELINE):]).resolve()
    assert json.loads(schema.read_text())["$id"] == scenario_json_schema()["$id"]
    assert "Client timeout:" in load(path).description, f"{path.name}: say which client timeout it assumes"


def test_a_good_scenario_loads(tmp_path: Path) -> None:
    scenario = load(write(tmp_path, GOOD))
    assert [i.intent_id for i in scenario.intents] == ["t1"]
    assert scenario.contracts()["tickets"].operations["create_ticket"].method == "POST"


def test_unknown_key_names_line_key_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("intents:", "intentz: []\nintents:"))
    message = error_of(path)
    assert f"{path}:10: intentz: unknown key 'intentz'; did you mean 'intents'?" in message


def test_unknown_destination_in_an_intent_lists_the_declared_ones(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, GOOD.replace("destination: tickets\n    params",
                                                     "destination: tikets\n    params")))
    assert ":13: intents[0].destination: unknown destination 'tikets'; did you mean 'tickets'?" in message
    assert "(valid: tickets)" in message


def test_unknown_operation_kind_lists_the_destination_kinds(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, GOOD.replace("kind: create_ticket", "kind: create_tiket")))
    assert "intents[0].kind: unknown operation kind for 'tickets' 'create_tiket'" in message
    assert "create_ticket" in message


def test_bad_enum_value_names_the_value_and_the_choices(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, GOOD.replace("service: tickets", "service: tickets\n    idempotency: strip")))
    assert "destinations.tickets.idempotency" in message
    assert "'strip'" in message and "'stripe'" in message


def test_missing_required_key(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, GOOD.replace("description: one ticket, response lost\n", "")))
    assert f"{tmp_path / 's.yaml'}:1: description: required key is missing" in message


def test_not_yaml_gives_the_line(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "name: [unclosed\n"))
    assert "not valid YAML" in message and "s.yaml:" in message


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read scenario file" in error_of(tmp_path / "nope.yaml")


def test_resolve_by_name_glob_all_and_unknown() -> None:
    dirs = [catalogue_dir()]
    assert [p.stem for p in resolve("response_lost", dirs)] == ["response_lost"]
    assert "response_lost" in [p.stem for p in resolve("all", dirs)]
    assert "response_lost" in [p.stem for p in resolve("response_*", dirs)]
    with pytest.raises(ScenarioError, match="Did you mean .response_lost."):
        resolve("response_lots", dirs)


def test_published_scenario_schema_file_is_up_to_date() -> None:
    from harness.scenario import SCHEMA_PATH, schema_text

    assert SCHEMA_PATH.read_text() == schema_text(), "run: python -m harness.scenario"


def test_every_bundled_scenario_validates_against_the_published_schema_file() -> None:
    from harness.scenario import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    for path in sorted(catalogue_dir().glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_published_schema_rejects_an_unknown_fault_action() -> None:
    from harness.scenario import SCHEMA_PATH

    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["faults"][0]["action"] = "drop_everything"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))


def test_published_schema_rejects_a_destination_name_that_is_no_id() -> None:
    from harness.scenario import SCHEMA_PATH

    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    spec = next(iter(data["destinations"].values()))
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(data, schema)
    data["destinations"] = {"my api": spec}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


@pytest.mark.parametrize("agent_env, valid", [
    ({"TICKETS_URL": "{url}"}, True),
    ({"HOSTPORT": "{host}:{port}", "LITERAL": "{{url}} {name}", "TOKEN": "Bearer {secret}", "O": "{origin}"}, True),
    ({"TICKETS_URL": "{uri}"}, False),
    ({"TICKETS_URL": "{url"}, False),
    ({"TICKETS_URL": "url}"}, False),
    ({"TICKETS_URL": "a\0b"}, False),
    ({"HARNESS_TICKETS": "{url}"}, False),
    ({"1URL": "{url}"}, False),
])
def test_published_schema_reads_agent_env_as_loading_does(agent_env: dict[str, str], valid: bool) -> None:
    from fake_destinations.spec import load_destination
    from harness.scenario import SCHEMA_PATH

    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    next(iter(data["destinations"].values()))["agent_env"] = agent_env
    schema = json.loads(SCHEMA_PATH.read_text())
    try:
        load_destination({"service": "tickets", "agent_env": agent_env})
    except ValueError:  # pydantic's ValidationError is one
        loads = False
    else:
        loads = True
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError:
        published = False
    else:
        published = True
    assert (loads, published) == (valid, valid)


ERRORS = Path(__file__).parent / "errors"


@pytest.mark.parametrize("bad", sorted(ERRORS.glob("*.yaml")), ids=lambda p: p.stem)
def test_error_messages_match_their_example_files(bad: Path) -> None:
    """One bad scenario per file, its expected message beside it (FILE stands for its path)."""
    expected = bad.with_suffix(".txt").read_text().rstrip("\n")
    assert error_of(bad).replace(str(bad), "FILE") == expected
