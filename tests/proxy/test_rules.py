"""Fault rules: validation errors and pure matching (no network)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.proxy import rules as rules_module
from harness.proxy.rules import (
    ACTIONS,
    FaultAction,
    FaultRule,
    Match,
    RequestFacts,
    RuleBook,
    actions_markdown,
    matches_criteria,
    path_pattern,
    refused_destinations,
    rules_json_schema,
)

REPO = Path(__file__).resolve().parents[2]


def facts(method="POST", path="/tickets", *, destination="tickets", key=None, body=None, headers=None, fp=None):
    h = {k.lower(): v for k, v in (headers or {}).items()}
    if key:
        h["idempotency-key"] = key
    return RequestFacts(destination, method, path, h, json.dumps(body).encode() if body is not None else b"", fp)


def rule(action="drop_response_after_commit", rid="r", **match):
    return FaultRule(id=rid, action=action, match=match)



def decisions(book, requests):
    out = []
    for f in requests:
        r = book.decide(f)
        out.append(r.id if r else None)
    return out


def test_spine_rule_parses_from_yaml_shape():
    r = FaultRule.model_validate({"id": "lose_first_create", "action": "drop_response_after_commit",
                                  "match": {"destination": "tickets", "method": "post", "path": "/tickets", "nth": 1}})
    assert r.match.method == "POST" and r.match.nth == 1


@pytest.mark.parametrize("data, words", [
    ({"id": "x", "action": "drop_response", "match": {}}, ["action", "drop_response_after_commit"]),
    ({"id": "x", "action": "latency", "match": {"nht": 1}}, ["nht", "Extra inputs are not permitted"]),
    ({"id": "x", "action": "latency", "colour": 1}, ["colour"]),
    ({"id": "x", "action": "synthetic_status"}, ["synthetic_status needs status (e.g. 503, 429, 500)"]),
    ({"id": "x", "action": "replace_status"}, ["replace_status needs status"]),
    ({"id": "x", "action": "hold_response"}, ["hold_ms"]),
    ({"id": "x", "action": "latency", "match": {"nth": 0}}, ["nth must be a positive count"]),
    ({"id": "x", "action": "latency", "match": {"nth": 1, "every": 2}}, ["at most one schedule"]),
    ({"id": "x", "action": "latency", "match": {"probability": 1.5}}, ["between 0 and 1"]),
    ({"id": "x", "action": "latency", "match": {"path": "tickets"}}, ["must start with '/'"]),
    ({"id": "x", "action": "refuse_connection", "match": {"destination": "t", "nth": 1}},
     ["match only on destination"]),
])
def test_bad_rules_are_clear_errors(data, words):
    with pytest.raises(ValidationError) as e:
        FaultRule.model_validate(data)
    for w in words:
        assert w in str(e.value)


def test_the_action_choices_are_the_registry():
    assert typing.get_args(FaultRule.model_fields["action"].annotation) == tuple(ACTIONS)
    action = rules_json_schema()["properties"]["action"]
    assert action["enum"] == list(ACTIONS)
    for a in ACTIONS.values():
        assert f"{a.name}: {a.doc}" in action["description"]


@pytest.mark.parametrize("name", [n for n, a in ACTIONS.items() if a.needs])
def test_required_parameters_come_from_the_declarations(name):
    needs = ACTIONS[name].needs
    with pytest.raises(ValidationError) as e:
        FaultRule.model_validate({"id": "x", "action": name})
    for field, hint in needs.items():
        assert f"action {name} needs {field} ({hint})" in str(e.value)
    FaultRule.model_validate({"id": "x", "action": name, **{field: 500 for field in needs}})


def test_connection_phase_actions_match_on_the_destination_only():
    for name in (n for n, a in ACTIONS.items() if a.phase == "connection"):
        FaultRule.model_validate({"id": "x", "action": name, "match": {"destination": "t"}})
        with pytest.raises(ValidationError, match="before any request is read: match only on destination"):
            FaultRule.model_validate({"id": "x", "action": name, "match": {"method": "POST"}})


def test_registry_checks_at_import(monkeypatch):
    a = ACTIONS["latency"]
    with pytest.raises(ValueError, match="'latency' is declared twice"):
        rules_module._registry(a, a)
    bogus = FaultAction("bogus", "request", "x", forwarded="no", client_sees="x", reads=("colour",))
    monkeypatch.setitem(ACTIONS, "bogus", bogus)
    with pytest.raises(ValueError, match=r"'bogus' reads \['colour'\], which FaultRule does not have"):
        rules_module._check_parameters()
    monkeypatch.setitem(ACTIONS, "bogus", FaultAction("bogus", "request", "x", forwarded="no", client_sees="x",
                                                      needs={"keep_bytes": "x"}))
    with pytest.raises(ValueError, match=r"needs \['keep_bytes'\], but FaultRule gives a default"):
        rules_module._check_parameters()
    monkeypatch.delitem(ACTIONS, "bogus")
    monkeypatch.setitem(ACTIONS, "latency", FaultAction("latency", "request", "x", forwarded="yes", client_sees="x"))
    with pytest.raises(ValueError, match=r"\['delay_ms', 'jitter_ms'\] belong to no fault action"):
        rules_module._check_parameters()


def test_the_readme_fault_table_is_generated_from_the_registry():
    readme = (REPO / "docs" / "destinations-and-faults.md").read_text()
    block = re.search(r"<!-- fault-actions:start[^>]*-->(.*?)<!-- fault-actions:end -->", readme, flags=re.DOTALL)
    assert block, ("docs/destinations-and-faults.md lacks the <!-- fault-actions:start --> ... "
                   "<!-- fault-actions:end --> markers")
    assert block.group(1).strip("\n") == actions_markdown().strip("\n"), (
        "docs/destinations-and-faults.md's fault table differs from the registry; put the output of "
        "python -c 'from harness.proxy.rules import actions_markdown; print(actions_markdown())' between the markers")


def test_the_proxy_doc_fault_table_lists_every_action_with_its_required_parameters():
    faults_section = (REPO / "docs" / "proxy.md").read_text().split("\n## Faults\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)`(.*?) \|", faults_section, flags=re.MULTILINE)
    assert [name for name, _ in rows] == list(ACTIONS)
    for name, cell in rows:
        for parameter in ACTIONS[name].needs:
            assert f"`{parameter}" in cell, f"docs/proxy.md: the row of {name} does not name its parameter {parameter}"


def test_rules_and_scenarios_do_not_import_mitmproxy():
    """The scenario loader and the checker validate rules; only the addon and its handlers need mitmproxy."""
    code = "import sys, harness.proxy.rules, harness.scenario; print('mitmproxy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_duplicate_rule_ids_rejected():
    with pytest.raises(ValueError, match="duplicate fault rule id.*r"):
        RuleBook([rule(), rule()])


def test_schema_publishes_descriptions():
    schema = rules_json_schema()
    assert "drop_response_after_commit" in json.dumps(schema)
    assert schema["additionalProperties"] is False
    assert "1-based" in json.dumps(schema["$defs"]["Match"])


@pytest.mark.parametrize("template, path, ok", [
    ("/tickets", "/tickets", True), ("/tickets", "/tickets/", True), ("/tickets", "/tickets/1", False),
    ("/tickets/{id}", "/tickets/42", True), ("/tickets/{id}", "/tickets/42/notes", False),
    ("/tickets/*", "/tickets/42/notes", True), ("/a.b", "/aXb", False),
])
def test_path_templates(template, path, ok):
    assert bool(path_pattern(template).fullmatch(path)) is ok


def test_criteria():
    m = Match(destination="tickets", method="POST", path="/tickets", headers={"X-Tenant": "acme", "Traceparent": "*"},
              body={"customer.id": 7})
    good = facts(headers={"X-Tenant": "acme", "traceparent": "00-x"}, body={"customer": {"id": 7}})
    assert matches_criteria(m, good)
    assert not matches_criteria(m, facts(headers={"X-Tenant": "acme"}, body={"customer": {"id": 7}}))
    assert not matches_criteria(m, facts(headers={"X-Tenant": "other", "traceparent": "1"},
                                         body={"customer": {"id": 7}}))
    assert not matches_criteria(m, facts(headers={"X-Tenant": "acme", "traceparent": "1"},
                                         body={"customer": {"id": 8}}))
    assert not matches_criteria(m, facts(method="GET", headers={"X-Tenant": "acme", "traceparent": "1"},
                                         body={"customer": {"id": 7}}))
    assert not matches_criteria(Match(destination="mail"), good)
    assert not matches_criteria(Match(body={"a": 1}), facts(body=None))


def test_nth_counts_matching_requests_of_the_run_not_keys():
    book = RuleBook([rule(nth=2, method="POST")])
    got = decisions(book, [facts("GET"), facts(key="a"), facts("GET"), facts(key="b"), facts(key="c")])
    assert got == [None, None, None, "r", None]


def test_nth_list_first_every():
    assert decisions(RuleBook([rule(nth=[1, 3])]), [facts()] * 4) == ["r", None, "r", None]
    assert decisions(RuleBook([rule(first=2)]), [facts()] * 4) == ["r", "r", None, None]
    assert decisions(RuleBook([rule(every=3)]), [facts()] * 7) == [None, None, "r", None, None, "r", None]


def test_nth_per_idempotency_key_and_fingerprint():
    book = RuleBook([rule(nth=2, per="idempotency_key")])
    got = decisions(book, [facts(key="a"), facts(key="b"), facts(key="a"), facts(key="a"), facts(key="b")])
    assert got == [None, None, "r", None, "r"]
    book = RuleBook([rule(nth=2, per="fingerprint")])
    assert decisions(book, [facts(fp="f1"), facts(fp="f2"), facts(fp="f1")]) == [None, None, "r"]


def test_body_client_token_is_a_key():
    assert facts(body={"client_token": "tok"}).idempotency_key == "tok"
    assert facts(key="h", body={"client_token": "tok"}).idempotency_key == "h"
    assert facts(body=[1]).idempotency_key is None


def test_a_form_body_holds_a_client_token_and_fields_a_rule_matches():
    """AWS query APIs (EC2) send a form: Action names the operation, ClientToken the key."""
    form = RequestFacts("ec2", "POST", "/", {"content-type": "application/x-www-form-urlencoded; charset=utf-8"},
                        b"Action=RunInstances&ImageId=ami-1&ClientToken=tok-7")
    assert form.idempotency_key == "tok-7"
    assert matches_criteria(Match(body={"Action": "RunInstances"}), form)
    assert not matches_criteria(Match(body={"Action": "DescribeInstances"}), form)
    not_a_form = RequestFacts("ec2", "POST", "/", {}, b"Action=RunInstances&ClientToken=tok-7")
    assert not_a_form.idempotency_key is None  # without the form content type the body is not read as one


def test_first_rule_wins_but_every_rule_counts():
    book = RuleBook([rule(rid="a", nth=1), rule(rid="b", nth=[1, 2])])
    assert decisions(book, [facts(), facts()]) == ["a", "b"]


def test_probability_is_seeded_and_deterministic():
    reqs = [facts()] * 200
    a = decisions(RuleBook([rule(probability=0.3)], seed=7), reqs)
    b = decisions(RuleBook([rule(probability=0.3)], seed=7), reqs)
    c = decisions(RuleBook([rule(probability=0.3)], seed=8), reqs)
    assert a == b and a != c
    assert 30 < a.count("r") < 90
    assert decisions(RuleBook([rule(probability=0.0)]), reqs[:20]) == [None] * 20


def test_jitter_is_seeded():
    r = FaultRule(id="slow", action="latency", delay_ms=5, jitter_ms=50)
    a, b = RuleBook([r], seed=1), RuleBook([r], seed=1)
    xs = [a.jitter(r) for _ in range(5)]
    assert xs == [b.jitter(r) for _ in range(5)]
    assert all(0 <= x <= 0.05 for x in xs) and len(set(xs)) == 5


def test_refuse_connection_is_not_a_request_decision():
    refuse = rule("refuse_connection", destination="tickets")
    book = RuleBook([refuse])
    assert refused_destinations([refuse]) == {"tickets"}
    assert book.decide(facts()) is None
