"""MCP end to end: the reference agent's real MCP client (the mcp package, streamable HTTP) against the fake
MCP server, through the real fault proxy, judged from its log, the journal (JSON-RPC aware) and the ledger;
each wrong MCP agent fails on the rule that names its flaw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load

MCP_SCENARIOS = sorted(p.stem for p in catalogue_dir().glob("mcp_*.yaml"))
WRONG = "python -m harness.agents.wrong."


def run(name: str, tmp_path: Path, agent: str | None = None):
    return run_scenario(load(catalogue_dir() / f"{name}.yaml"), agent=agent, evidence_root=tmp_path)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_catalogue_has_the_four_mcp_scenarios() -> None:
    assert MCP_SCENARIOS == ["mcp_annotation_contradicted", "mcp_slow_result", "mcp_tool_error_after_commit",
                             "mcp_tool_result_lost"]


@pytest.mark.parametrize("name", MCP_SCENARIOS)
def test_the_reference_agent_passes(name: str, tmp_path: Path) -> None:
    result = run(name, tmp_path)
    assert result.passed, render_result(result)
    [op] = result.verdict.operations
    assert op.state == "succeeded" and len(op.effects) == 1


def test_a_lost_tool_result_is_one_attempt_matched_to_its_tools_call_and_reconciled(tmp_path: Path) -> None:
    result = run("mcp_tool_result_lost", tmp_path)
    assert result.passed, render_result(result)
    evidence = Path(result.evidence_dir)
    log = lines(evidence / "agent.ndjson")
    journal = lines(evidence / "journal.ndjson")
    [attempt] = [e for e in log if e["event"] == "attempt"]
    assert (attempt["method"], attempt["path"], attempt["dispatch_state"]) == ("tools/call", "create_order",
                                                                              "sent_no_response")
    calls = [e for e in journal if (e.get("rpc") or {}).get("method") == "tools/call"]
    protocol = [e for e in journal if e.get("rpc") and e["rpc"]["method"] != "tools/call"]
    assert protocol, "the client's initialize and friends crossed the proxy too"
    [lost] = [e for e in calls if e["rpc"]["tool"] == "create_order"]
    assert lost["fault"] == "drop_response_after_commit" and lost["traceparent"] == attempt["traceparent"]
    assert lost["body_fingerprint"] == attempt["request_fingerprint"]
    [view] = result.verdict.operations[0].attempts
    assert view.wire is not None and view.wire["flow_id"] == lost["flow_id"]
    assert [e for e in log if e["event"] == "observation"][0]["path"] == "find_orders"


@pytest.mark.parametrize("agent, scenario, codes, words", [
    ("trusts_idempotent_hint", "mcp_annotation_contradicted", {"H010", "H050"},
     "the annotation was contradicted by the destination"),
    ("tool_error_retried", "mcp_tool_error_after_commit", {"H010"}, "whose answer was an MCP error result"),
])
def test_a_wrong_mcp_agent_fails_on_the_rule_that_names_its_flaw(agent: str, scenario: str, codes: set[str],
                                                                words: str, tmp_path: Path) -> None:
    result = run(scenario, tmp_path, WRONG + agent)
    found = {f.code for f in result.verdict.findings}
    assert not result.passed and codes <= found, render_result(result)
    assert any(words in f.message for f in result.verdict.findings), render_result(result)


def test_pytest_scenario_mcp_tool_result_lost_passes(run_plugin) -> None:
    result = run_plugin("--scenario", "mcp_tool_result_lost", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*scenario mcp_tool_result_lost*PASS*", "*sent_no_response*"])


ONE_TRACEPARENT = '''
from harness.agents.reference import Agent, main
from harness.model.agent import trace_id


class OneTraceparent(Agent):
    """The reference agent, but with one traceparent for every request of an operation, and a lookup before its
    first call (is it there already?): the wire holds the header on the lookup first, then on the call."""

    looked: set[str] = set()

    def traceparent(self, op):
        return f"00-{trace_id(op['operation_id'])}-00f067aa0ba902b7-01"

    def dispatch(self, op, reason):
        if op["operation_id"] not in self.looked:
            self.looked.add(op["operation_id"])
            self.lookup(op)
        return super().dispatch(op, reason)


main(OneTraceparent)
'''


@pytest.mark.parametrize("name", ["mcp_tool_result_lost", "mcp_tool_error_after_commit"])
def test_one_traceparent_on_the_lookup_and_the_call_still_pairs_each_call_with_its_flow(
        name: str, tmp_path: Path) -> None:
    """A traceparent names a trace, not a request: an agent sending the same one on a lookup before its tools/call
    passes as the reference agent does (each call is paired with the flow of its own tool, not the first flow
    with that header: before, the call took the lookup's flow, a false H028/H002)."""
    agent = tmp_path / "one_traceparent.py"
    agent.write_text(ONE_TRACEPARENT)
    result = run(name, tmp_path / "runs", agent=f"python {agent}")
    assert result.passed, render_result(result)
    journal = lines(result.evidence_dir / "journal.ndjson")
    calls = [e for e in journal if (e.get("rpc") or {}).get("method") == "tools/call"]
    assert len({e["traceparent"] for e in calls}) == 1 and calls[0]["rpc"]["tool"].startswith("find_"), \
        "one header, on the lookup first"
    [op] = result.verdict.operations
    paired = [journal[a.wire["line"] - 1]["rpc"]["tool"] for a in op.attempts]
    assert paired and not any(tool.startswith("find_") for tool in paired), paired
