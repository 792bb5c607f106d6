"""What the framework tests read from a run of a certified row: the run itself (finished, every agent run exiting
0), the codes it found (X001 counted when an expectation failed), and the attempts its agent logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from certification.matrix import CELL_AGENT_TIMEOUT
from harness.engine import run_scenario
from harness.results import EXPECTATION_CODE, ScenarioResult
from harness.scenario import load


def run_row(scenario: Path, command: str, tmp_path: Path) -> ScenarioResult:
    # a certified cell's time limit: a framework's imports alone passed the scenario's 30 s on a loaded machine
    result = run_scenario(load(scenario), agent=command, evidence_root=tmp_path, keep_evidence="all",
                          agent_timeout=CELL_AGENT_TIMEOUT)
    assert not result.incomplete, result.incomplete
    assert all(r.exit_status == 0 for r in result.agent_runs), result.agent_runs
    return result


def codes(result: ScenarioResult) -> set[str]:
    return {f.code for f in result.verdict.findings} | ({EXPECTATION_CODE} if result.expectation_failures else set())


def attempts(result: ScenarioResult) -> list[dict[str, Any]]:
    lines = (Path(result.evidence_dir) / "agent.ndjson").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "attempt"]
