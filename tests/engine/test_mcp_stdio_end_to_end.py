"""MCP over stdio end to end: each catalogue MCP scenario with its destinations served over stdio
(``mcp_transport: stdio``); the reference agent starts the server's command (HARNESS_MCP_SERVER_<NAME>) with the
mcp SDK's stdio client, in its sandbox, and is judged by the same rules from the same journal and ledger as over
Streamable HTTP (tests/engine/test_mcp_end_to_end.py); a wrong agent still fails on the rule naming its flaw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.errors import ScenarioError
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load, with_mcp_transport

MCP_SCENARIOS = sorted(p.stem for p in catalogue_dir().glob("mcp_*.yaml"))


def run(name: str, tmp_path: Path, agent: str | None = None):
    return run_scenario(load(catalogue_dir() / f"{name}.yaml"), agent=agent, evidence_root=tmp_path,
                        mcp_transport="stdio")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", MCP_SCENARIOS)
def test_the_reference_agent_passes_over_stdio(name: str, tmp_path: Path) -> None:
    result = run(name, tmp_path)
    assert result.passed, render_result(result)
    [op] = result.verdict.operations
    assert op.state == "succeeded" and len(op.effects) == 1
    journal = lines(Path(result.evidence_dir) / "journal.ndjson")
    calls = [e for e in journal if (e.get("rpc") or {}).get("method") == "tools/call"]
    # the calls crossed the pipe: the relay the agent started posted them, not the agent's own HTTP client
    assert calls and all(e["headers"].get("user-agent", "").startswith("Python-urllib") for e in calls), calls
    for attempt in op.attempts:  # each attempt found on the wire, as over HTTP
        assert attempt.wire is not None


def test_a_wrong_agent_fails_over_stdio_on_the_rule_that_names_its_flaw(tmp_path: Path) -> None:
    result = run("mcp_tool_error_after_commit", tmp_path, "python -m harness.agents.wrong.tool_error_retried")
    assert not result.passed and "H010" in {f.code for f in result.verdict.findings}, render_result(result)
    assert any("whose answer was an MCP error result" in f.message for f in result.verdict.findings)


def test_a_transport_that_is_none_is_refused_by_name() -> None:
    with pytest.raises(ScenarioError, match=r"MCP transport 'pipe' is none; valid: http, stdio"):
        with_mcp_transport(load(catalogue_dir() / "mcp_slow_result.yaml"), "pipe")
