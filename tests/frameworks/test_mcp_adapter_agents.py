"""The agents on a framework's own MCP adapter (pydantic-ai's MCPToolset, the Agents SDK's MCPServerStreamableHttp,
langchain-mcp-adapters' MultiServerMCPClient under LangGraph) end to end, each in the environment of its certified
releases (FastMCP 4 and mcp 2.x cannot share one with mitmproxy 11; langchain-mcp-adapters pins mcp<2): the real
adapter, the real fault proxy, the real fake MCP server. What each adapter does as
shipped, read from the evidence: the log, the journal and the ledger. Their whole rows are
tests/certification/test_framework_matrix.py's cells; this says why they are what they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from certification.matrix import load_frameworks
from fake_destinations.ledger import read_requests
from harness.journal import read_journal
from harness.resources import catalogue_dir
from harness.results import EXPECTATION_CODE, ScenarioResult
from tests.frameworks.certified_runs import attempts, codes, run_row

_, AGENTS = load_frameworks()


def run(agent: str, scenario: str, tmp_path: Path) -> ScenarioResult:
    return run_row(catalogue_dir() / f"{scenario}.yaml", AGENTS[agent].run_command, tmp_path)


def tool_calls(result: ScenarioResult, tool: str) -> list[dict[str, Any]]:
    """The journal's tools/call flows of ``tool``: what reached the proxy."""
    return [e for e in read_journal(Path(result.evidence_dir) / "journal.ndjson")
            if (e.get("rpc") or {}).get("method") == "tools/call" and (e.get("rpc") or {}).get("tool") == tool]


def test_mcp_toolset_as_shipped_retries_an_error_result_into_a_second_order(tmp_path: Path) -> None:
    """tool_error_behavior='retry': the error result becomes a retry prompt, the model calls again, the tool
    commits again. The log says it: two attempts, no key, the second a retry of the first."""
    result = run("pydantic_ai_mcp_toolset_defaults", "mcp_tool_error_after_commit", tmp_path)
    assert {"H010", "H016"} <= codes(result), f"{codes(result)} ({result.evidence_dir})"
    first, second = attempts(result)
    assert (first["tool_error"], first.get("idempotency_key"), second.get("idempotency_key")) == (True, None, None)
    assert second["retry_of_attempt_id"] == first["attempt_id"]
    assert len(tool_calls(result, "create_order")) == 2
    (op,) = result.verdict.operations
    assert len(op.effects) == 2


def test_a_lost_answer_kills_mcp_toolset_s_session_so_its_retry_never_leaves(tmp_path: Path) -> None:
    """The model's second call is made (H010: a blind retry) but FastMCP's transport died with the first: the call
    fails at once, sending nothing (logged not_sent), and the run raises. One order, its outcome unknown."""
    result = run("pydantic_ai_mcp_toolset_defaults", "mcp_tool_result_lost", tmp_path)
    assert codes(result) == {"H002", "H010", EXPECTATION_CODE}, f"{codes(result)} ({result.evidence_dir})"
    assert [a["dispatch_state"] for a in attempts(result)] == ["sent_no_response", "not_sent"]
    assert len(tool_calls(result, "create_order")) == 1


def test_a_lost_answer_ends_the_agents_sdk_run_at_its_next_tools_list(tmp_path: Path) -> None:
    """The default failure_error_function asks the model to try again, but the SDK lists the server's tools
    first, on the dead session: the run raises, no second call. One order, unknown."""
    result = run("openai_agents_mcp_server_defaults", "mcp_tool_result_lost", tmp_path)
    assert codes(result) == {"H002", EXPECTATION_CODE}, f"{codes(result)} ({result.evidence_dir})"
    assert [a["dispatch_state"] for a in attempts(result)] == ["sent_no_response"]
    assert "Connection closed" in (Path(result.evidence_dir) / "agent.stdout").read_text(encoding="utf-8")


def test_the_agents_sdk_hands_an_error_result_to_the_model_and_a_timeout_back_as_a_retry(tmp_path: Path) -> None:
    """An error result is the tool's output (no retry asked: one order, unknown); a timeout is an exception, which
    the default failure_error_function turns into "Please try again": a second order."""
    error = run("openai_agents_mcp_server_defaults", "mcp_tool_error_after_commit", tmp_path / "error")
    assert codes(error) == {EXPECTATION_CODE} and len(attempts(error)) == 1, codes(error)
    slow = run("openai_agents_mcp_server_defaults", "mcp_slow_result", tmp_path / "slow")
    assert {"H010", "H016", "H050"} <= codes(slow), f"{codes(slow)} ({slow.evidence_dir})"


def test_langgraph_s_default_retry_policy_resends_a_lost_mcp_call_on_a_new_session(tmp_path: Path) -> None:
    """langchain-mcp-adapters opens a session per call and raises the transport's failure (an anyio ExceptionGroup
    around httpx's RemoteProtocolError), which RetryPolicy()'s default_retry_on retries: the ToolNode runs the same
    call again, on a session of its own, and the tool commits again. Two orders, no key, the second logged as a
    retry of the first; the call's traceparent on its tools/call alone, so the log meets the wire there."""
    result = run("langchain_mcp_client_defaults", "mcp_tool_result_lost", tmp_path)
    assert {"H010", "H016"} <= codes(result), f"{codes(result)} ({result.evidence_dir})"
    first, second = attempts(result)
    assert (first["dispatch_state"], second["dispatch_state"]) == ("sent_no_response", "response_received")
    assert second["retry_of_attempt_id"] == first["attempt_id"]
    assert first.get("idempotency_key") is None and second.get("idempotency_key") is None
    calls = tool_calls(result, "create_order")
    assert [c["traceparent"] for c in calls] == [first["traceparent"], second["traceparent"]]
    journal = read_journal(Path(result.evidence_dir) / "journal.ndjson")
    assert {e.get("traceparent") for e in journal if (e.get("rpc") or {}).get("method") == "initialize"} == {None}
    assert sum((e.get("rpc") or {}).get("method") == "initialize" for e in journal) >= 3  # listing, and each call
    (op,) = result.verdict.operations
    assert len(op.effects) == 2


def test_langchain_mcp_adapters_hands_an_error_result_to_the_model_as_an_error_message(tmp_path: Path) -> None:
    """handle_tool_errors=True: the error result is a ToolMessage with status "error", no exception, so the node's
    retry policy never sees it and nothing asks the model to call again: one order, its outcome unknown."""
    result = run("langchain_mcp_client_defaults", "mcp_tool_error_after_commit", tmp_path)
    assert codes(result) == {EXPECTATION_CODE}, f"{codes(result)} ({result.evidence_dir})"
    (attempt,) = attempts(result)
    assert attempt["tool_error"] is True and len(tool_calls(result, "create_order")) == 1
    assert "error: " in (Path(result.evidence_dir) / "agent.stdout").read_text(encoding="utf-8")


def test_the_correct_rows_carry_the_key_and_reference_and_look_up_through_the_adapter(tmp_path: Path) -> None:
    """One tools/call, with the operation's key and reference as arguments; after the lost answer a new session (a
    new run; under LangGraph the ToolNode's retry, each call on a session of its own) calls the lookup tool through
    the same adapter and finds the order: succeeded, one effect."""
    for agent in ("pydantic_ai_mcp_safe", "openai_agents_mcp_safe", "langchain_mcp_safe"):
        result = run(agent, "mcp_tool_result_lost", tmp_path / agent)
        assert result.passed, f"{agent}: {codes(result)} ({result.evidence_dir})"
        (op,) = result.verdict.operations
        assert (op.state, op.effects) == ("succeeded", ["ord_0001"]), agent
        assert len(tool_calls(result, "create_order")) == 1 and len(tool_calls(result, "find_orders")) == 1, agent
        (row,) = [r for r in read_requests(Path(result.evidence_dir) / "ledger.sqlite") if r["path"] == "create_order"]
        (attempt,) = attempts(result)
        assert (row["client_reference"], row["idempotency_key"]) == (op.operation_id, attempt.get("idempotency_key"))
        assert attempt.get("idempotency_key") is not None, agent
