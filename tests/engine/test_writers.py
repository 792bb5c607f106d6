"""The engine renders nothing itself: it hands the judged result to the writers the front end chose
(harness/writers.py), and a failing run's text report is rendered once, for verdict.txt and the front end alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness.report
from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.results import ScenarioResult
from harness.scenario import load
from harness.writers import VerdictText, evidence_writers

WRONG = "python -m harness.agents.wrong.new_key_per_attempt"


def test_a_failing_run_is_rendered_once_and_its_writers_are_the_callers(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[ScenarioResult] = []
    render = harness.report.render_result

    def counted(result: ScenarioResult, **kwargs: Any) -> str:
        rendered.append(result)
        return render(result, **kwargs)

    monkeypatch.setattr(harness.report, "render_result", counted)
    seen: list[tuple[ScenarioResult, Any]] = []
    text = VerdictText()
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=WRONG, evidence_root=tmp_path,
                          writers=[*evidence_writers(text), lambda r, evidence: seen.append((r, evidence))])
    assert not result.passed and rendered == [result]
    assert seen and seen[0][0] is result and seen[0][1].events  # the evidence it was judged from
    shown = text.text_for(result)
    assert rendered == [result] and "FAIL H002" in shown  # the text written, not rendered again
    assert (EvidenceLayout(result.evidence_dir).verdict_text.read_text() == shown + "\n")
    assert text.text_for(result, shown=0) and len(rendered) == 2  # another view is another rendering

    bare = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=WRONG, evidence_root=tmp_path, writers=[])
    layout = EvidenceLayout(bare.evidence_dir)
    assert not bare.passed and layout.context.is_file()  # the run's own evidence, and no verdict file of the engine's
    assert not layout.verdict_json.exists() and not layout.verdict_text.exists()
    assert not (bare.evidence_dir / "report.html").exists() and len(rendered) == 2
