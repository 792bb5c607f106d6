"""Seeded fuzzing of generic destination declarations (`api:`): any value at any key path of a declaration
either loads or gives a ScenarioError naming the file; and what loads is served by a real destination
process that answers every route without an unhandled error (aiohttp's bare 500) or a traceback in its log.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import requests
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fake_destinations import DestinationHost
from harness.scenario import Scenario
from tests.fake_destinations.test_api import EC2, LAMBDA, STRIPE
from tests.fuzz.corpus import _dump, _replace, key_paths
from tests.fuzz.test_scenario_fuzz import assert_loads_or_names_the_file

DECLARATIONS = {"stripe": STRIPE, "ec2": EC2, "lambda": LAMBDA}


def scenario_of(name: str, api: Any) -> dict[str, Any]:
    kind = next(iter(n for n, r in DECLARATIONS[name]["routes"].items() if r.get("commits")))
    return {"name": "fuzzed", "description": "a fuzzed api", "destinations": {"d": {"api": api}},
            "intents": [{"intent_id": "i", "kind": kind, "destination": "d"}]}


def mutant(data: st.DataObject, values: st.SearchStrategy[Any], tmp_path: Path) -> Path:
    """A scenario file whose api declaration has one value, at one key path, drawn from `values`."""
    name = data.draw(st.sampled_from(sorted(DECLARATIONS)), label="declaration")
    api = DECLARATIONS[name]
    where = data.draw(st.sampled_from(key_paths(api)), label="key path")
    path = tmp_path / "api.yaml"
    path.write_bytes(_dump(scenario_of(name, _replace(api, where, data.draw(values, label="value")))))
    return path


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
            | st.text(st.characters(codec="utf-8"), max_size=20)
            | st.sampled_from(["{id}", "{n:017x}", "{params.x}", "{", "}}", "{{", "/x/{id}", "<a>{id}</a>", "<a",
                               "body.id", "header.X", "POST", "GET", "client_token", "stripe", "form", "json",
                               "aws_query", "create_payment_intent", "run_instances"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_in_a_declaration_loads_or_names_the_file(data: st.DataObject, tmp_path: Path) -> None:
    scenario = assert_loads_or_names_the_file(mutant(data, _VALUES, tmp_path))
    if scenario is not None:
        yaml.safe_dump(scenario.model_dump(mode="json"))


def _request_for(route: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    path = re.sub(r"\{\w+\}", "x1", route["path"])
    return route["method"], path, dict(route.get("match") or {})


# values a declaration may well hold, so that most mutants load and the runtime meets them
_PLAUSIBLE = st.sampled_from(["{id}", "x-{n:06d}-{id}", "{params.x}", "{params.amount:d}", "<r><id>{id}</id></r>",
                              "{request_id}", "{key}", "{now}", 0, 404, 503, True, None, [], {}, {"a": "{id}"},
                              "client_token", "stripe", "ietf", "none", "form", "json", "aws_query", "PUT"])


@settings(max_examples=80, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_declaration_that_loads_is_served_without_an_unhandled_error(data: st.DataObject, tmp_path: Path) -> None:
    path = mutant(data, _PLAUSIBLE, tmp_path)  # arbitrary values: the test above
    scenario: Scenario | None = assert_loads_or_names_the_file(path)
    event("loaded" if scenario is not None else "refused")
    if scenario is None:
        return
    spec = scenario.destinations["d"]
    log = tmp_path / "destinations.log"
    with DestinationHost({"d": spec}, tmp_path / "ledger.sqlite", log_path=log) as host:
        assert spec.api is not None
        for route in spec.api.model_dump()["routes"].values():
            method, route_path, fields = _request_for(route)
            bodies: list[Any] = [fields, {**fields, "x": "<&>", "ImageId": "a", "amount": "12", "currency": "eur"},
                                 b"\xff\xfe=\x00", b"[1]", b"{", b"a=1&a=2&" + b"b" * 10_000]
            for body in bodies:
                answer = requests.request(method, host.urls["d"] + route_path, data=body or None, timeout=10)
                assert answer.text != "500 Internal Server Error\n\nServer got itself in trouble", route
            answer = requests.request(method, host.urls["d"] + route_path, json={"x": [1, {"y": None}]}, timeout=10)
            assert answer.text != "500 Internal Server Error\n\nServer got itself in trouble", route
    assert "Traceback" not in log.read_text(), log.read_text()[-2000:]
