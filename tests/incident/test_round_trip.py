"""The round trip of issue 15, for every (wrong agent, scenario it fails) pair of the certification matrix:
run the pair, `reproduce` its evidence folder, and the scenario written fails the same agent on the same rule
codes, and the reference agent passes it. Through the real engine, proxy, destinations and CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.matrix import load_expectations
from harness.resources import catalogue_dir
from harness.scenario import load

EXPECTED = load_expectations()
PAIRS = sorted((agent, scenario) for agent, scenarios in EXPECTED.caught_by.items() for scenario in scenarios)


def codes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted({f.code for f in result.verdict.findings})


@pytest.mark.parametrize(("agent", "scenario"), PAIRS, ids=[f"{a}-{s}" for a, s in PAIRS])
def test_reproduce_on_a_failing_run_fails_the_same_agent_the_same_way_and_the_reference_passes(
        agent: str, scenario: str, tmp_path: Path) -> None:
    command = EXPECTED.command(agent)
    original = run_scenario(load(catalogue_dir() / f"{scenario}.yaml"), agent=command, evidence_root=tmp_path / "runs")
    assert not original.passed, f"{agent} no longer fails {scenario}: the matrix says it does"
    written = tmp_path / "reproduced.yaml"
    done = subprocess.run([sys.executable, "-m", "harness", "reproduce", str(original.evidence_dir), "-o",
                           str(written)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reproduced = load(written)
    again = run_scenario(reproduced, agent=command, evidence_root=tmp_path / "again")
    assert not again.passed and codes(again) == codes(original), (codes(original), codes(again), written.read_text())
    reference = run_scenario(reproduced, agent=EXPECTED.reference, evidence_root=tmp_path / "reference")
    assert reference.passed, (reference.verdict.findings, written.read_text())
