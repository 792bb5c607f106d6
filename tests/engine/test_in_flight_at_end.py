"""A flow still in flight when the scenario ends is journaled, never dropped; a held answer nobody waits
for any more ends with its client.

The reproducer: a lookup delayed 15 s outlives the agent (which gave up on it, looked again and exited)
and the proxy's bounded drain at finish. Before, the journal lost such a flow and the checker blamed a
correct agent for a phantom request.
"""

from __future__ import annotations

from pathlib import Path

from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.journal import IN_FLIGHT_AT_END, read_journal
from harness.report import render_result
from harness.scenario import load

SCENARIO = Path(__file__).parent / "scenarios" / "lookup_delayed_15s.yaml"
HELD = Path(__file__).parent / "scenarios" / "hold_15s_deliver.yaml"


def test_a_delayed_flow_outliving_the_run_is_journaled_in_flight_at_end(tmp_path: Path) -> None:
    result = run_scenario(load(SCENARIO), evidence_root=tmp_path)
    journal = read_journal(EvidenceLayout(result.evidence_dir).journal)
    delayed = [e for e in journal if e["fault"] == "latency"]
    assert [(e["client_outcome"], e["forwarded"]) for e in delayed] == [(IN_FLIGHT_AT_END, False)]
    assert result.passed, render_result(result)


def test_a_held_answer_ends_when_its_client_gives_up(tmp_path: Path) -> None:
    """The 15 s hold is cut short once the agent's client (1.5 s read timeout) has left: the journal says
    timeout, and the run does not wait the hold out."""
    result = run_scenario(load(HELD), evidence_root=tmp_path)
    journal = read_journal(EvidenceLayout(result.evidence_dir).journal)
    held = [e for e in journal if e["fault"] == "hold_response"]
    assert [(e["client_outcome"], e["forwarded"], e["upstream_status"]) for e in held] == [("timeout", True, 201)]
    assert held[0]["ts_done"] - held[0]["ts_request"] < 10  # not the 15 s hold (the client left at 1.5 s)
    assert result.passed, render_result(result)
