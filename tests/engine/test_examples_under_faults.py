"""The bundled example agents survive every fault `explore` can draw for HTTP (issue 43, goal 3): one scenario per
fault action (its first explore values), the fault on the first write of response_lost, each example run through
the real engine: it exits 0 (no crash: a broken body is an answer lost, docs/contract.md section 5) and the
checker passes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engine import run_scenario
from harness.proxy.rules import ACTIONS, ClientTimeouts
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load
from tests.docs.test_command_blocks import declared_files

ROOT = Path(__file__).resolve().parents[2]
# as explore draws them: not the sender's kill, which leaves a one-process agent nobody to rerun its work (the
# durable-engine rows are its test)
HTTP_ACTIONS = sorted(name for name, action in ACTIONS.items() if not action.tool_call_only and not action.kills_sender)
CLIENT_TIMEOUT = 1.5  # both examples wait 1.5 s for an answer


def first_values(name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for parameter, values in ACTIONS[name].explore.items():
        first = values.milliseconds(CLIENT_TIMEOUT)[0] if isinstance(values, ClientTimeouts) else values[0]
        if first is not None:
            out[parameter] = first
    return out


def scenario_with(action: str, folder: Path) -> Path:
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["name"] = f"response_lost_{action}"
    match: dict[str, Any] = {"destination": "tickets"}
    if ACTIONS[action].phase != "connection":  # a refused connection reads no request: it matches the destination
        match.update(method="POST", path="/tickets", nth=1)
    data["faults"] = [{"id": f"first_write_{action}", "match": match, "action": action, **first_values(action)}]
    data.pop("expect", None)  # the states and counts depend on the fault: the rules judge
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("agents")
    (folder / "first_agent.py").write_text(declared_files(ROOT / "docs" / "first-agent.md")["first_agent.py"])
    return {"my_agent": f"python {ROOT / 'examples' / 'my_agent.py'}",
            "first_agent": f"python {folder / 'first_agent.py'}"}


@pytest.mark.parametrize("example", ["my_agent", "first_agent"])
@pytest.mark.parametrize("action", HTTP_ACTIONS)
def test_an_example_survives_the_fault(example: str, action: str, agents: dict[str, str], tmp_path: Path) -> None:
    result = run_scenario(load(scenario_with(action, tmp_path)), agent=agents[example], evidence_root=tmp_path)
    assert all(run.exit_status == 0 for run in result.agent_runs), render_result(result)
    assert result.passed, render_result(result)
