"""The instrumented example agents through the real engine (destinations, mitmproxy fault proxy, agent
processes): they pass the catalogue's HTTP scenarios they handle, fail the ones they do not handle on the
rules that name why, and the deliberately wrong variants fail on their flaw's rules. The instrumentation
reports what happened; it does not make an agent pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.results import EXPECTATION_CODE
from harness.scenario import load

MODULE = "python -m harness.agents.instrumented."
# the HTTP catalogue: the instrumentation patches HTTP clients; SSH hosts and MCP tool servers (whose calls these
# agents do not make) are out of its scope
HTTP = sorted(p.stem for p in catalogue_dir().glob("*.yaml")
              if all(d.get("service") not in ("ssh", "mcp")
                     for d in yaml.safe_load(p.read_text())["destinations"].values()))
# (agent, scenario) -> the codes that must be among the findings; every cell not listed must pass
FAILS: dict[tuple[str, str], set[str]] = {
    # the tenacity agent neither polls a 202 nor reads back after a success: the log says so, truthfully
    ("tenacity_retry", "async_accepted"): {EXPECTATION_CODE},  # resolved unknown: the 202 proves acceptance only
    ("tenacity_retry", "reconciliation_duplicate"): {"H016", EXPECTATION_CODE},  # two deliveries, one claimed
    # wrong on purpose, instrumented the same way
    ("wrong_fresh_key", "response_lost_key_replay"): {"H002", "H003", "H010", "H016", EXPECTATION_CODE},
    ("wrong_timeout_as_failed", "timeout_late_success"): {"H006", "H015", EXPECTATION_CODE},
    ("wrong_timeout_as_failed", "response_lost"): {"H006", "H015", EXPECTATION_CODE},
}
# generic destinations (api:): a body-token key with a nested effect ref, and the bundled orders profile
GENERIC = {"api_token_error_after_commit": Path(__file__).parent / "scenarios" / "api_token_error_after_commit.yaml",
           "orders_response_lost": Path(__file__).parents[1] / "engine" / "scenarios" / "orders_response_lost.yaml"}
PATHS = {**{s: catalogue_dir() / f"{s}.yaml" for s in HTTP}, **GENERIC}
CELLS = [(agent, s) for agent in ("plain_requests", "tenacity_retry") for s in [*HTTP, *GENERIC]] + \
    [cell for cell in FAILS if cell[0].startswith("wrong_")]


def test_the_http_catalogue_is_what_the_brief_names() -> None:
    required = {"response_lost", "response_lost_key_replay", "request_lost", "rate_limited",
                "server_error_before_commit", "server_error_after_commit", "timeout_late_success"}
    assert required <= set(HTTP)
    assert not any(s.startswith("ssh_") for s in HTTP)


@pytest.mark.parametrize("agent, scenario", CELLS, ids=[f"{a}-{s}" for a, s in CELLS])
def test_instrumented_agent(agent: str, scenario: str, tmp_path: Path) -> None:
    result = run_scenario(load(PATHS[scenario]), agent=MODULE + agent, evidence_root=tmp_path)
    codes = {f.code for f in result.verdict.findings} | ({EXPECTATION_CODE} if result.expectation_failures else set())
    assert not result.incomplete, result.incomplete
    expected = FAILS.get((agent, scenario))
    if expected is None:
        assert result.passed, f"{agent} on {scenario}: {sorted(codes)} {result.expectation_failures} " \
            f"({result.evidence_dir})"
    else:
        assert not result.passed and expected <= codes, \
            f"{agent} on {scenario}: found {sorted(codes)}, expected {sorted(expected)} ({result.evidence_dir})"
    assert all(run.exit_status == 0 for run in result.agent_runs[-1:]), result.agent_runs


@pytest.mark.parametrize("mode", ["reverse-https", "forward", "forward-https"])
def test_plain_agent_in_every_proxy_mode(mode: str, tmp_path: Path) -> None:
    """Through a forward proxy the request names its destination in an absolute URL or a CONNECT tunnel:
    the instrumentation still tells which destination each request went to."""
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["proxy"] = {"mode": mode}
    path = tmp_path / "response_lost_mode.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_scenario(load(path), agent=MODULE + "plain_requests", evidence_root=tmp_path / "evidence")
    assert result.passed, (result.verdict.findings, result.expectation_failures, result.evidence_dir)
    (op,) = result.verdict.operations
    assert [a.dispatch_state for a in op.attempts] == ["sent_no_response"]
