"""A flow still in flight when the scenario ends is journaled, never dropped.

The reproducer: a valid 15 s ``hold_response`` outlives the agent (which gave up on it, reconciled
and exited) and the proxy's bounded drain at finish. The destination committed the request; before,
the journal lost the flow and the checker blamed a correct agent for a phantom attempt (H018).
"""

from __future__ import annotations

from pathlib import Path

from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.journal import IN_FLIGHT_AT_END, read_journal
from harness.report import render_result
from harness.scenario import load

SCENARIO = Path(__file__).parent / "scenarios" / "hold_15s_deliver.yaml"


def test_a_held_flow_outliving_the_run_is_journaled_in_flight_at_end(tmp_path: Path) -> None:
    result = run_scenario(load(SCENARIO), evidence_root=tmp_path)
    journal = read_journal(EvidenceLayout(result.evidence_dir).journal)
    held = [e for e in journal if e["fault"] == "hold_response"]
    assert [(e["client_outcome"], e["forwarded"], e["upstream_status"]) for e in held] == [
        (IN_FLIGHT_AT_END, True, 201)]
    assert "H018" not in {f.code for f in result.verdict.findings}, render_result(result)
    assert result.passed, render_result(result)
