"""Issue 30's attacks on the ground truth, through the real engine (destinations, proxy, agent processes):
an agent that scans the run's destination process for its control plane and tries to reset the ledger,
advance the clock and read the state; one that makes a duplicate and then tries to wipe it; one that goes
past the fault proxy. Each ends refused, or in a verdict that names what happened; never a quiet PASS."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fake_destinations.host import DestinationPool
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.scenario import load
from tests.common.sockets import listening_ports

AGENT = f"{sys.executable} -m tests.common.attack_agents.control_plane"


@pytest.fixture
def pool():
    pool = DestinationPool()
    yield pool
    pool.close()


def attack(pool: DestinationPool, tmp_path: Path, mode: str):
    """Run response_lost with the attacking agent, aimed at every port its destination process listens on."""
    scenario = load(catalogue_dir() / "response_lost.yaml")
    host = pool.acquire(scenario.destinations)  # the process the run will get back, reset
    ports = sorted(listening_ports(host.process.pid))
    assert ports == sorted(host.ports.values())  # nothing but the destinations listens: no control port
    result = run_scenario(scenario, agent=f"{AGENT} {mode} {' '.join(map(str, ports))}",
                          evidence_root=tmp_path, pool=pool)
    probes = [json.loads(line) for line in (Path(result.evidence_dir) / "agent.stderr").read_text().splitlines()
              if line.startswith("{")]
    return result, probes


def test_an_agent_that_scans_for_the_control_plane_finds_none_and_is_named(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "reset")
    assert len(probes) == 3  # state, clock and reset, on the one destination port
    assert all(p.get("status") == 404 for p in probes), probes  # nothing answers for the control plane
    assert not any('"reset": true' in p.get("body", "") or "in_flight" in p.get("body", "") for p in probes)
    # the ledger kept its ground truth: the one ticket of the lost response is there and judged
    assert not result.passed and "H061" in result.verdict.codes, result.verdict.codes
    said = " ".join(f.message for f in result.verdict.by_code("H061"))
    assert "POST /reset" in said and "POST /clock" in said and "bypassed the fault proxy" in said
    assert result.facts["effects"] == 1, result.facts


def test_a_duplicate_cannot_be_wiped_after_the_fact(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "duplicate-then-reset")
    assert probes and all(p.get("status") == 404 for p in probes), probes
    assert {"H016", "H061"} <= result.verdict.codes, result.verdict.codes
    [duplicate] = result.verdict.by_code("H016")
    assert "committed 2 effect(s)" in duplicate.message, duplicate.message  # the ledger still holds both


def test_a_request_past_the_fault_proxy_is_a_finding(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "bypass")
    assert [p.get("status") for p in probes] == [201], probes  # the side door did commit a ticket...
    assert "H061" in result.verdict.codes and not result.passed  # ...and the verdict names it
    [finding] = result.verdict.by_code("H061")
    assert "POST /tickets" in finding.message and "with no flow of the proxy's" in finding.message
    assert finding.evidence[0]["table"] == "requests" and finding.evidence[0]["effect_ref"]
