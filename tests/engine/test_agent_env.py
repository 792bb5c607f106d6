"""A destination's ``agent_env`` through the real engine, fault proxy and destinations: a team's agent that
reads its address from a variable of its own (TICKETS_URL), never from the contract's, reaches the destination
through the proxy, and the variables are filled as docs/destinations.md says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.contract import destination_env
from harness.engine import run_scenario
from harness.report import render_result
from harness.scenario import load

# reads TICKETS_URL and nothing else of the harness's; prints what it was given, then creates one ticket
TEAM_AGENT = """
import json, os, sys, urllib.request

url = os.environ["TICKETS_URL"]
print(json.dumps({name: os.environ.get(name) for name in sys.argv[1:]}))
request = urllib.request.Request(url + "/tickets", method="POST", headers={
    "Content-Type": "application/json", "Idempotency-Key": "team-key-1",
    "Authorization": "Bearer " + os.environ["TICKETS_TOKEN"]},
    data=json.dumps({"title": "Printer on fire", "project": "OPS"}).encode())
with urllib.request.urlopen(request, timeout=5) as answer:
    print(answer.status, json.load(answer)["id"])
"""
SHOWN = ["TICKETS_URL", "TICKETS_TOKEN", "TICKETS_AT", "TICKETS_LITERAL", "HARNESS_DESTINATION_TICKETS",
         "HARNESS_SECRET_TICKETS"]


def scenario_file(tmp_path: Path, agent_env: dict[str, str]) -> Path:
    path = tmp_path / "team_ticket.yaml"
    path.write_text(yaml.safe_dump({
        "name": "team_ticket",
        "description": "A team's agent that reads its API's address from TICKETS_URL creates one ticket.",
        "destinations": {"tickets": {"service": "tickets", "agent_env": agent_env}},
        "intents": [{"intent_id": "printer-on-fire", "kind": "create_ticket", "destination": "tickets",
                     "params": {"title": "Printer on fire", "project": "OPS"}}],
        "agent_log": "none",
        "expect": {"effects": {"tickets": 1}},
    }))
    return path


def test_a_team_agent_reaches_its_destination_through_the_proxy_by_its_own_variable(tmp_path: Path) -> None:
    agent = tmp_path / "team_agent.py"
    agent.write_text(TEAM_AGENT)
    path = scenario_file(tmp_path, {"TICKETS_URL": "{url}", "TICKETS_TOKEN": "{secret}",
                                    "TICKETS_AT": "{name}@{host}:{port}", "TICKETS_LITERAL": "{{url}}"})
    result = run_scenario(load(path), agent=f"python {agent} {' '.join(SHOWN)}", evidence_root=tmp_path / "ev")
    assert result.passed, render_result(result)
    folder = result.evidence_dir
    given = json.loads((folder / "agent.stdout").read_text().splitlines()[0])
    proxy_url = given["HARNESS_DESTINATION_TICKETS"]
    assert given["TICKETS_URL"] == proxy_url  # exactly the contract's URL: the proxy's, not the destination's
    assert given["TICKETS_TOKEN"] == given["HARNESS_SECRET_TICKETS"]
    assert given["TICKETS_AT"] == "tickets@" + proxy_url.removeprefix("http://")
    assert given["TICKETS_LITERAL"] == "{url}"
    # the proxy journal shows the ticket's creation, forwarded and answered: the agent went through the proxy
    journal = [json.loads(line) for line in (folder / "journal.ndjson").read_text().splitlines()]
    assert [(e["destination"], e["method"], e["path"], e["forwarded"], e["upstream_status"]) for e in journal] == [
        ("tickets", "POST", "/tickets", True, 201)]
    assert journal[0]["idempotency_key"] == "team-key-1"
    effects = json.loads((folder / "ledger.json").read_text())["effects"]
    assert [e["destination"] for e in effects] == ["tickets"]
    # kept as declared in context.json: the templates, never a filled secret
    context = json.loads((folder / "context.json").read_text())
    assert context["destinations"]["tickets"]["spec"]["agent_env"]["TICKETS_TOKEN"] == "{secret}"


def test_without_agent_env_the_team_agent_has_no_address(tmp_path: Path) -> None:
    """The same agent and scenario with no agent_env: the variable is the destination's doing, nothing else's."""
    agent = tmp_path / "team_agent.py"
    agent.write_text(TEAM_AGENT)
    result = run_scenario(load(scenario_file(tmp_path, {})), agent=f"python {agent}", evidence_root=tmp_path / "ev")
    assert not result.passed
    assert "KeyError: 'TICKETS_URL'" in (result.evidence_dir / "agent.stderr").read_text()


@pytest.mark.parametrize("url, base_path, expected", [
    ("http://127.0.0.1:4001", "", {"url": "http://127.0.0.1:4001", "origin": "http://127.0.0.1:4001",
                                   "host": "127.0.0.1", "port": "4001"}),
    ("http://127.0.0.1:4001/", "/v2/", {"url": "http://127.0.0.1:4001/v2", "origin": "http://127.0.0.1:4001",
                                        "host": "127.0.0.1", "port": "4001"}),
    ("https://localhost:8443", "api/v1", {"url": "https://localhost:8443/api/v1", "origin": "https://localhost:8443",
                                          "host": "localhost", "port": "8443"}),
    ("https://tickets.test", "", {"url": "https://tickets.test", "origin": "https://tickets.test",
                                  "host": "tickets.test", "port": "443"}),
    ("ssh://127.0.0.1:2222", "", {"url": "ssh://127.0.0.1:2222", "origin": "ssh://127.0.0.1:2222",
                                  "host": "127.0.0.1", "port": "2222"}),
])
def test_each_placeholder_is_filled_from_the_destination_s_url(url: str, base_path: str,
                                                                 expected: dict[str, str]) -> None:
    templates = {name.upper(): "{" + name + "}" for name in (*expected, "name", "secret")}
    filled = destination_env("billing", templates, url=url, secret="hsk_canary_1", base_path=base_path)
    assert filled == {**{name.upper(): value for name, value in expected.items()},
                      "NAME": "billing", "SECRET": "hsk_canary_1"}

