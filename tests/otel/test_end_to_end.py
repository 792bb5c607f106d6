"""A trace-only agent through the real engine, fault proxy and destinations: judged from its spans alone
(``agent_log: otel``), with the rule codes its audit-log twin gets on the same scenario."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.contract import AGENT_LOG_FILE, TRACE_EVENTS_FILE, TRACE_FILE
from harness.engine import run_scenario
from harness.evidence import load_evidence
from harness.otel.reader import read_trace
from harness.otel.verdict import read_verdict_spans
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.results import ScenarioResult
from harness.scenario import load

TRACED = "python -m harness.agents.otel.traced"


def run(scenario: str, agent: str, tmp_path: Path, agent_log: str = "otel") -> ScenarioResult:
    return run_scenario(load(catalogue_dir() / f"{scenario}.yaml"), agent=agent, evidence_root=tmp_path,
                        agent_log=agent_log)


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(list(argv))
    return status, out.getvalue()


def test_a_scenario_that_says_agent_log_otel_is_judged_from_the_trace(tmp_path: Path) -> None:
    text = (catalogue_dir() / "response_lost.yaml").read_text(encoding="utf-8")
    (tmp_path / "response_lost.yaml").write_text(text + "agent_log: otel\n", encoding="utf-8")
    scenario = load(tmp_path / "response_lost.yaml")
    result = run_scenario(scenario, agent=TRACED, evidence_root=tmp_path / "evidence")
    assert result.passed, render_result(result)
    folder = result.evidence_dir
    assert not (folder / AGENT_LOG_FILE).exists()  # it wrote spans only
    assert json.loads((folder / "context.json").read_text())["agent_log"] == "otel"
    [op] = result.verdict.operations
    assert op.state == "succeeded" and op.attempts[0].dispatch_state == "sent_no_response"
    assert op.attempts[0].wire is not None  # matched to the journal by the traceparent the span propagated
    evidence = load_evidence(folder)
    [attempt] = [e for e in evidence.events if e["event"] == "attempt"]
    assert attempt["traceparent"] == evidence.journal[0]["traceparent"]
    assert attempt["traceparent"][36:52] == attempt["otel"]["span_id"]
    judged = [json.loads(line) for line in (folder / TRACE_EVENTS_FILE).read_text().splitlines()]
    assert [e["event"] for e in judged] == ["operation", "attempt", "observation", "resolution"]
    assert all(e["otel"]["span_id"] for e in judged)


@pytest.mark.parametrize("scenario", ["request_lost", "rate_limited", "server_error_after_commit", "lookup_lag",
                                      "response_lost_key_replay", "async_accepted"])
def test_the_trace_only_agent_passes(tmp_path: Path, scenario: str) -> None:
    result = run(scenario, TRACED, tmp_path)
    assert result.passed, render_result(result)


@pytest.mark.parametrize("scenario, traced, logged", [
    ("response_lost_key_replay", "harness.agents.otel.wrong_fresh_key", "harness.agents.instrumented.wrong_fresh_key"),
    ("response_lost_lookup_only", "harness.agents.otel.wrong_blind_retry", "harness.agents.wrong.blind_backoff"),
])
def test_a_wrong_twin_fails_on_the_codes_its_audit_log_twin_fails_on(tmp_path: Path, scenario: str, traced: str,
                                                                      logged: str) -> None:
    from_spans = run(scenario, f"python -m {traced}", tmp_path, "otel")
    from_log = run(scenario, f"python -m {logged}", tmp_path, "events")
    assert not from_spans.passed and not from_log.passed
    assert from_spans.verdict.codes == from_log.verdict.codes, (render_result(from_spans), render_result(from_log))
    assert "H016" in from_spans.verdict.codes or "H010" in from_spans.verdict.codes

    # check DIR judges the folder again from the signed trace: the same codes; the verdict as spans reads back
    folder = from_spans.evidence_dir
    status, out = cli("check", str(folder), "--format", "json", "--otel-out", str(tmp_path / "verdict.jsonl"))
    assert status == 1
    assert {f["code"] for f in json.loads(out)["findings"]} == from_spans.verdict.codes
    spans = read_verdict_spans(tmp_path / "verdict.jsonl")
    [root] = [s for s in spans if s["name"] == "harness.verdict"]
    assert set(root["attributes"]["harness.verdict.codes"]) == from_spans.verdict.codes
    assert root["status_code"] == 2 and root["attributes"]["harness.verdict.passed"] is False
    judged = from_spans.verdict.operations[0]
    [op] = [s for s in spans if s["attributes"].get("harness.operation.id") == judged.operation_id]
    assert op["name"] == "harness.operation" and op["parent_span_id"] == root["span_id"]
    assert {f["harness.finding.code"] for f in op["findings"]} == {f.code for f in judged.findings}

    # the offline audit of the trace alone finds what needs no wire
    status, out = cli("audit", str(folder / TRACE_FILE), "--input", "otlp", "--format", "json")
    assert status == 1
    offline = {f["code"] for o in json.loads(out)["operations"] for f in o["findings"]}
    assert offline and offline <= from_spans.verdict.codes


def test_a_trace_changed_after_the_run_is_not_judged(tmp_path: Path) -> None:
    result = run("response_lost", TRACED, tmp_path)
    assert result.passed, render_result(result)
    trace = result.evidence_dir / TRACE_FILE
    with trace.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"resourceSpans": []}) + "\n")
    status, out = cli("check", str(result.evidence_dir))
    assert status == 3
    assert "agent trace: not the trace the harness checkpointed when the agent exited" in out
    status, out = cli("verify", str(result.evidence_dir))
    assert status == 1 and f"{trace}: " in out and "after the checkpointed" in out


def test_the_exported_verdict_of_a_passing_run_is_a_trace_the_harness_reads(tmp_path: Path) -> None:
    target = tmp_path / "verdicts.jsonl"
    status, out = cli("run", "response_lost", "--agent", TRACED, "--agent-log", "otel", "--evidence-dir",
                      str(tmp_path / "evidence"), "--otel-out", str(target))
    assert status == 0, out
    log = read_trace(target)
    assert log.spans == 2 and [error for _, error, _ in log.items if error] == []
    [root] = [s for s in read_verdict_spans(target) if s["name"] == "harness.verdict"]
    assert root["attributes"]["harness.verdict.passed"] is True and root["attributes"]["harness.scenario"] == \
        "response_lost"


def test_the_plugin_exports_the_verdict_as_run_does(run_plugin: Any, tmp_path: Path) -> None:
    """`pytest --otel-out` and `run --otel-out` write the one export (`export_result`): a failing run's verdict,
    with its scenario, agent and findings."""
    target = tmp_path / "verdicts.jsonl"
    result = run_plugin("--scenario", "response_lost", "--agent", "python -m harness.agents.wrong.new_key_per_attempt",
                        "--otel-out", str(target))
    result.assert_outcomes(failed=1)
    [root] = [s for s in read_verdict_spans(target) if s["name"] == "harness.verdict"]
    attributes = root["attributes"]
    assert attributes["harness.verdict.passed"] is False and attributes["harness.scenario"] == "response_lost"
    assert attributes["harness.agent"].endswith("new_key_per_attempt") and "H002" in attributes["harness.verdict.codes"]
