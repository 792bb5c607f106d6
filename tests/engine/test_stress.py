"""Load the harness as a busy CI would: one scenario with 500 intents, and several runs at once.

What must hold under load is the evidence, not a speed: every request the proxy journaled as
forwarded is a request the destination's ledger recorded (same flow id), and the other way round,
and a correct agent still passes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from harness.engine import run_scenario
from harness.evidence import load_evidence
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load

INTENTS = 500


def many_intents(path: Path) -> Path:
    """500 tickets; every 10th create loses its response after the commit."""
    path.write_text(yaml.safe_dump({
        "name": "five_hundred_tickets",
        "description": "500 intents; every 10th response is lost after the commit.",
        "destinations": {"tickets": {"service": "tickets"}},
        "faults": [{"id": "lose_every_tenth", "match": {"destination": "tickets", "method": "POST",
                                                        "path": "/tickets", "every": 10},
                    "action": "drop_response_after_commit"}],
        "intents": [{"intent_id": f"ticket-{n:03d}", "kind": "create_ticket", "destination": "tickets",
                     "params": {"title": f"ticket {n}", "project": "OPS"}} for n in range(INTENTS)],
        "agent_timeout_seconds": 300,
        "expect": {"effects": {"tickets": INTENTS}},
    }), encoding="utf-8")
    return path


def test_five_hundred_intents_journal_equals_ledger_and_the_reference_agent_passes(tmp_path: Path) -> None:
    result = run_scenario(load(many_intents(tmp_path / "many.yaml")), evidence_root=tmp_path / "evidence")
    assert result.passed, render_result(result)[-3000:]
    evidence = load_evidence(result.evidence_dir)
    forwarded = sorted(e["flow_id"] for e in evidence.journal if e["forwarded"])
    received = sorted(r["flow_id"] for r in evidence.requests if r.get("flow_id"))
    assert forwarded == received
    assert len({e["effect_ref"] for e in evidence.effects}) == INTENTS
    assert len(result.verdict.operations) == INTENTS


def test_runs_at_once_in_separate_processes_all_pass(tmp_path: Path) -> None:
    runs = 4
    scenario = catalogue_dir() / "response_lost.yaml"
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--evidence-dir",
                               str(tmp_path / f"run-{n}")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for n in range(runs)]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            outputs.append((proc.returncode, out.decode(errors="replace")))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [code for code, _ in outputs] == [0] * runs, "\n\n".join(out for _, out in outputs)
    for n in range(runs):
        [folder] = (tmp_path / f"run-{n}").iterdir()
        evidence = load_evidence(folder)
        assert sorted(e["flow_id"] for e in evidence.journal if e["forwarded"]) == sorted(
            r["flow_id"] for r in evidence.requests if r.get("flow_id"))
