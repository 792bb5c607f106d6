"""Issue 30's attacks on the ground truth, through the real engine (destinations, proxy, agent processes):
an agent that scans the run's destination process for its control plane and tries to reset the ledger,
advance the clock and read the state; one that makes a duplicate and then tries to wipe it; one that goes
past the fault proxy; one that edits the live ledger file to hide its duplicate. Each ends refused, or in a
verdict that names what happened (INCOMPLETE when the ground truth itself was changed); never a quiet PASS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fake_destinations.host import DestinationPool
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.scenario import load
from tests.common.attack_agents.control_plane import HIDE
from tests.common.sockets import listening_ports

AGENT = f"{sys.executable} -m tests.common.attack_agents.control_plane"


@pytest.fixture
def pool():
    pool = DestinationPool()
    yield pool
    pool.close()


def attack(pool: DestinationPool, tmp_path: Path, mode: str):
    """Run response_lost with the attacking agent, aimed at every port its destination process listens on
    (or, for the ledger's attacks, at the live ledger file)."""
    scenario = load(catalogue_dir() / "response_lost.yaml")
    host = pool.acquire(scenario.destinations)  # the process the run will get back, reset
    ports = sorted(listening_ports(host.process.pid))
    assert ports == sorted(host.ports.values())  # nothing but the destinations listens: no control port
    aimed = str(host.ledger_path) if mode in HIDE else " ".join(map(str, ports))
    result = run_scenario(scenario, agent=f"{AGENT} {mode} {aimed}", evidence_root=tmp_path, pool=pool)
    probes = [json.loads(line) for line in (Path(result.evidence_dir) / "agent.stderr").read_text().splitlines()
              if line.startswith("{")]
    return result, probes


def test_an_agent_that_scans_for_the_control_plane_finds_none_and_is_named(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "reset")
    assert len(probes) == 3  # state, clock and reset, on the one destination port
    # nothing answers for the control plane: what does not cross the proxy is refused at the gate
    assert all(p.get("status") == 403 and "not_through_the_fault_proxy" in p["body"] for p in probes), probes
    assert not any('"reset": true' in p.get("body", "") or "in_flight" in p.get("body", "") for p in probes)
    # the ledger kept its ground truth: the one ticket of the lost response is there and judged
    assert not result.passed and "H061" in result.verdict.codes, result.verdict.codes
    said = " ".join(f.message for f in result.verdict.by_code("H061"))
    assert "POST /reset" in said and "POST /clock" in said and "bypassed the fault proxy" in said
    assert result.facts["effects"] == 1, result.facts


def test_a_duplicate_cannot_be_wiped_after_the_fact(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "duplicate-then-reset")
    assert probes and all(p.get("status") == 403 for p in probes), probes
    assert {"H016", "H061"} <= result.verdict.codes, result.verdict.codes
    [duplicate] = result.verdict.by_code("H016")
    assert "committed 2 effect(s)" in duplicate.message, duplicate.message  # the ledger still holds both


def test_a_request_past_the_fault_proxy_is_refused_and_a_finding(pool, tmp_path: Path) -> None:
    result, probes = attack(pool, tmp_path, "bypass")
    assert [p.get("status") for p in probes] == [403], probes  # the side door is shut: no ticket...
    assert "H061" in result.verdict.codes and not result.passed  # ...and the verdict names the attempt
    [finding] = result.verdict.by_code("H061")
    assert "POST /tickets" in finding.message and "with no flow of the proxy's" in finding.message
    assert finding.evidence[0]["table"] == "requests" and finding.evidence[0]["outcome"] == "rejected"
    assert result.facts["effects"] == 1, result.facts  # the agent's own ticket, through the proxy


def test_another_runs_destinations_are_out_of_reach(pool, tmp_path: Path) -> None:
    """A destination process serving another run (gated with that run's secret, as the engine gates it)
    refuses this run's agent: nothing is committed there, and the attempt is on that ledger's record."""
    other_pool = DestinationPool()
    try:
        scenario = load(catalogue_dir() / "response_lost.yaml")
        other = other_pool.acquire(scenario.destinations)
        other.gate("a-secret-of-the-other-run")
        result = run_scenario(scenario, agent=f"{AGENT} bypass {other.ports['tickets']}", evidence_root=tmp_path,
                              pool=pool)
        probes = [json.loads(line) for line in (Path(result.evidence_dir) / "agent.stderr").read_text().splitlines()
                  if line.startswith("{")]
        assert [p.get("status") for p in probes] == [403], probes
        assert other.effects() == [] and [r["outcome"] for r in other.requests()] == ["rejected"]
        assert result.passed, result.verdict.codes  # this run's own destinations saw nothing amiss
    finally:
        other_pool.close()


@pytest.mark.parametrize(("mode", "said"), [
    ("duplicate-then-delete", "effects: the destinations wrote 2 row(s) and 1 are there: 1 removed"),
    ("duplicate-then-replay", "effects row seq 2 (tickets, tkt_0002) is not the row its writer signed: it was "
                              "edited after it was written"),
    ("duplicate-then-clear", "requests: the destinations wrote 2 row(s) and 0 are there: 2 removed"),
])
def test_a_duplicate_hidden_in_the_ledger_file_is_never_judged(pool, tmp_path: Path, mode: str, said: str,
                                                               monkeypatch) -> None:
    """Edited behind the destinations' back, the ledger would read one ticket and the run would pass (or the
    duplicate read as a replay): the signatures say the ground truth was changed, and nothing is judged. Run
    unsandboxed: the sandbox hides the live ledger from the agent (below); the signatures hold without it."""
    monkeypatch.setenv("HARNESS_SANDBOX", "off")
    result, edits = attack(pool, tmp_path, mode)
    assert edits and all(e["rows"] >= 1 for e in edits), edits  # the edits did land in the live file
    assert not result.passed and result.incomplete, result.verdict.codes
    assert any(said in gap and gap.startswith("effect ledger: not as the destinations wrote it") for gap in
               result.incomplete), result.incomplete
    again = subprocess.run([sys.executable, "-m", "harness", "check", str(result.evidence_dir)], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 3 and "INCOMPLETE" in again.stdout and said in again.stdout, again.stdout


def test_in_the_sandbox_the_live_ledger_is_out_of_the_agents_reach(pool, tmp_path: Path) -> None:
    """The same edit from inside the sandbox: the ledger's folder is not there to edit, the duplicate stays in the
    ground truth and is judged (H016)."""
    result, edits = attack(pool, tmp_path, "duplicate-then-delete")
    assert not any(e.get("rows", 0) >= 1 for e in edits), edits  # no edit landed
    assert not result.incomplete and "H016" in result.verdict.codes, (result.incomplete, result.verdict.codes)
