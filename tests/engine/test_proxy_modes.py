"""The spine in every proxy mode: the reference agent passes response_lost in reverse (plain and
HTTPS through mitmproxy's CA) and forward (plain and HTTPS) mode; a wrong agent still fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load


def variant(tmp_path: Path, mode: str) -> Path:
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["proxy"] = {"mode": mode}
    path = tmp_path / f"response_lost_{mode}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mode", ["reverse", "reverse-https", "forward", "forward-https"])
def test_reference_agent_passes_in_every_mode(tmp_path: Path, mode: str) -> None:
    result = run_scenario(load(variant(tmp_path, mode)), evidence_root=tmp_path / "evidence")
    assert result.passed, render_result(result)
    [op] = result.verdict.operations
    assert [a.dispatch_state for a in op.attempts][0] == "sent_no_response"


@pytest.mark.parametrize("mode", ["reverse-https", "forward"])
def test_wrong_agent_fails_in_other_modes(tmp_path: Path, mode: str) -> None:
    result = run_scenario(load(variant(tmp_path, mode)), evidence_root=tmp_path / "evidence",
                          agent="python -m harness.agents.wrong.new_key_per_attempt")
    assert not result.passed
    assert {"H002", "H016"} <= {f.code for f in result.verdict.findings}
