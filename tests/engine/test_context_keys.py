"""context.json's keys are spelled once (harness.contract: ``ContextKey`` and the completeness mark's ``*_KEY``): every
key a run writes is one of them, so the engine that writes and the readers (harness.evidence, the checker, the
incident readers) cannot drift apart."""

from __future__ import annotations

import json
from pathlib import Path

import harness.contract as contract
from harness.contract import ContextKey, EvidenceLayout
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.scenario import load


def test_every_key_of_a_runs_context_is_spelled_in_the_contract(tmp_path: Path) -> None:
    spelled = {value for name, value in vars(ContextKey).items() if name.isupper()}
    spelled |= {value for name, value in vars(contract).items() if name.endswith("_KEY") and isinstance(value, str)}
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path)
    context = json.loads(EvidenceLayout(result.evidence_dir).context.read_text())
    assert result.passed
    assert set(context) - spelled == set()
    assert set(context[contract.COMPLETENESS_KEY]) - spelled == set()
    assert set(context[ContextKey.AGENT]) - spelled == set()
    assert len(spelled) == len({name for name in vars(ContextKey) if name.isupper()}) + len(
        [n for n, v in vars(contract).items() if n.endswith("_KEY") and isinstance(v, str)])  # no key spelled twice
