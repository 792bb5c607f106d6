"""A planned crash is verified, not assumed (issue 18, "What was seen"): an agent that a wrapper started outside
the harness's process group survives the kill of the group, and goes on logging beside the restarted one.
Its lines after the kill are proof the crash did not happen: the run is INCOMPLETE (never PASS), naming the
session and the lines, in the run, in `check FOLDER` and in the pytest plugin alike (all read `load_evidence`)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from harness.cli import EXIT_INCOMPLETE, main
from harness.contract import AUDIT_LOG_ENV, REFERENCE_AGENT, EvidenceLayout
from harness.engine import run_scenario
from harness.evidence import crash_survivors, lines_after_kill, load_evidence, reused_sessions
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.sandbox import choose_sandbox
from harness.scenario import load
from tests.common.escaping_wrapper import ESCAPED_PID_FILE, running

WRAPPER = Path(__file__).parents[1] / "common" / "escaping_wrapper.py"
CRASH = catalogue_dir() / "crash_after_dispatch.yaml"


def survivors(log: Path, agent: Any) -> list[str]:
    """The gaps ``load_evidence`` derives from the one scan of the log (``lines_after_kill``)."""
    return crash_survivors(lines_after_kill(log, agent), log.name)


def test_an_agent_that_escaped_the_kill_makes_the_run_incomplete(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproducer, unsandboxed: before, this run PASSED (killed by the harness (planned crash), and the
    agent's attempt, lookup and resolution logged after the kill). Now the escaped agent is found by the contract
    environment it carries, killed before the restart, and named: INCOMPLETE, in the run and in `check FOLDER`.
    (Its late log lines, ``crash_survivors``, are the second net: the hand-written logs below.)"""
    result = run_scenario(load(CRASH), agent=f"python {WRAPPER} {REFERENCE_AGENT}", evidence_root=tmp_path,
                          sandbox="off")
    layout = EvidenceLayout(result.evidence_dir)
    escaped = int((layout.state_dir / ESCAPED_PID_FILE).read_text())
    try:
        assert not running(escaped)
        killed = result.agent_runs[0]
        assert killed.killed_by_harness and killed.log_bytes_at_end is not None
        assert killed.survivors and f"pid {escaped} " in killed.survivors[0], killed.survivors
        assert not result.passed and not result.verdict.operations, render_result(result)
        [gap] = result.incomplete
        assert "agent run 1: a process of the agent outlived it" in gap
        assert "INCOMPLETE" in render_result(result)
        assert main(["check", str(result.evidence_dir)]) == EXIT_INCOMPLETE  # the folder says so too
        assert "outlived it" in capsys.readouterr().out
    finally:
        if running(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_in_the_sandbox_the_escaped_agent_dies_with_the_kill(tmp_path: Path) -> None:
    """The same wrapper in bubblewrap: its PID namespace dies with the kill, setsid or not, so the crash the
    scenario declares is the crash that happened, and the reference agent's restart is judged (PASS)."""
    if not choose_sandbox().confined:
        pytest.skip("no bubblewrap here")
    result = run_scenario(load(CRASH), agent=f"python {WRAPPER} {REFERENCE_AGENT}", evidence_root=tmp_path)
    assert result.passed and not result.incomplete, render_result(result)
    assert result.agent_runs[0].killed_by_harness and result.sandbox and "bubblewrap" in result.sandbox


def split_at(log: Path, offset: int) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """The log's numbered lines that start before ``offset`` and from it on."""
    before, after, at = [], [], 0
    for number, line in enumerate(log.read_bytes().splitlines(keepends=True), 1):
        (before if at < offset else after).append((number, line))
        at += len(line)
    return before, after


def test_a_crash_that_held_is_judged(tmp_path: Path) -> None:
    """The reference agent, killed for real: its session writes nothing after the kill, the run passes."""
    result = run_scenario(load(CRASH), evidence_root=tmp_path)
    assert result.passed, render_result(result)
    killed, restarted = result.agent_runs
    assert killed.killed_by_harness and 0 < killed.log_bytes_at_end <= restarted.log_bytes_at_end
    assert restarted.log_bytes_at_end == EvidenceLayout(result.evidence_dir).agent_log.stat().st_size


# -- the check alone, on hand-written logs ----------------------------------------------------------

def write_log(path: Path, sessions: list[str]) -> list[int]:
    """One event per session given; the byte offset after each line."""
    ends, size = [], 0
    with path.open("w", newline="") as f:
        for n, session in enumerate(sessions):
            line = json.dumps({"event": "observation", "ts": n, "session_id": session, "operation_id": "op_1"})
            f.write(line + "\n")
            size += len(line) + 1
            ends.append(size)
    return ends


def runs(*ends: tuple[int | None, bool]) -> dict[str, object]:
    return {"runs": [{"log_bytes_at_end": end, "killed_by_harness": killed} for end, killed in ends]}


def test_lines_of_the_killed_session_after_its_end_are_named(tmp_path: Path) -> None:
    log = tmp_path / "agent.ndjson"
    ends = write_log(log, ["s1", "s1", "s2", "s1", "s2", "s1"])
    [gap] = survivors(log, runs((ends[1], True), (ends[-1], False)))
    assert "session s1 (agent run 1, killed by the harness) wrote 2 line(s) after the kill (agent.ndjson lines 4-6)" \
        in gap


def test_the_restarted_session_and_a_session_first_seen_later_are_not_the_killed_run(tmp_path: Path) -> None:
    log = tmp_path / "agent.ndjson"
    ends = write_log(log, ["s1", "s1", "s2", "w2", "s2"])
    assert survivors(log, runs((ends[1], True), (ends[-1], False))) == []


def test_nothing_to_verify(tmp_path: Path) -> None:
    log = tmp_path / "agent.ndjson"
    ends = write_log(log, ["s1", "s1", "s1"])
    assert survivors(log, runs((ends[0], False), (ends[-1], False))) == []  # no kill
    assert survivors(log, runs((None, True), (ends[-1], False))) == []  # an older folder: not measured
    assert survivors(log, {}) == [] and survivors(tmp_path / "absent", runs((0, True))) == []


def test_a_line_break_of_any_kind_counts_as_the_reader_counts_it(tmp_path: Path) -> None:
    """Line numbers are the ones findings use (\\r\\n and a lone \\r end a line too), offsets are bytes."""
    log = tmp_path / "agent.ndjson"
    first = json.dumps({"session_id": "s1", "note": "é"}).encode() + b"\r\n"
    log.write_bytes(first + b"\n" + json.dumps({"session_id": "s1"}).encode() + b"\r")
    [gap] = survivors(log, runs((len(first), True)))
    assert "wrote 1 line(s) after the kill (agent.ndjson line 3)" in gap


def test_load_evidence_turns_it_into_incomplete(tmp_path: Path) -> None:
    layout = EvidenceLayout(tmp_path)
    ends = write_log(layout.agent_log, ["s1", "s1"])
    layout.context.write_text(json.dumps({"evidence": {"complete": True}, "agent": runs((ends[0], True))}))
    evidence = load_evidence(tmp_path)
    assert len(evidence.incomplete) == 1 and "session s1" in evidence.incomplete[0]


def test_the_runner_measures_the_log_once_the_agent_is_gone(tmp_path: Path) -> None:
    from harness.agent_process import run_agent

    log = tmp_path / "agent.ndjson"
    code = "import os; open(os.environ['HARNESS_AUDIT_LOG'], 'a').write('x' * 7)"
    run = run_agent(f"python -c \"{code}\"", {AUDIT_LOG_ENV: str(log)}, timeout=20, stdout=tmp_path / "out",
                    stderr=tmp_path / "err")  # sandboxed or not: the log is the agent's own file either way
    assert run.exit_status == 0 and run.log_bytes_at_end == 7


# -- a session id reused across the crash --------------------------------------------------------

BWRAP = "bubblewrap 0.8.0: own PID, user, mount and IPC namespaces; writable: the agent's log"


def test_in_the_sandbox_a_killed_session_s_later_lines_are_a_reused_session_id_not_a_survivor(tmp_path: Path) -> None:
    """Bubblewrap's PID namespace dies with the kill: nothing of the killed run wrote after it, so its session's
    later lines are a later process's (``reused_sessions``, H020), not a gap. Unsandboxed it cannot be told: a gap."""
    log = tmp_path / "agent.ndjson"
    ends = write_log(log, ["s1", "s1", "s1", "s1"])
    confined = {"runs": [{"log_bytes_at_end": ends[1], "killed_by_harness": True, "sandbox": BWRAP},
                         {"log_bytes_at_end": ends[-1], "killed_by_harness": False, "sandbox": BWRAP}]}
    assert survivors(log, confined) == []
    assert reused_sessions(lines_after_kill(log, confined)) == {"s1": {"agent_run": 1, "lines": [3, 4]}}
    loose = runs((ends[1], True), (ends[-1], False))
    assert reused_sessions(lines_after_kill(log, loose)) == {} and len(survivors(log, loose)) == 1
    container = {"runs": [dict(run, sandbox="container: own PID namespace (Docker)") for run in loose["runs"]]}
    assert reused_sessions(lines_after_kill(log, container)) == {} and len(survivors(log, container)) == 1


def test_a_constant_session_id_across_the_crash_is_h020_in_the_sandbox(tmp_path: Path) -> None:
    """The held-out batch's fixed_session_id, through the engine: judged (not INCOMPLETE), H020 names the restarted
    process's lines under the killed run's session id. The reference agent passes the same run
    (test_a_crash_that_held_is_judged)."""
    if not choose_sandbox().confined:
        pytest.skip("no bubblewrap here: unsandboxed, a killed run's session writing later stays INCOMPLETE")
    result = run_scenario(load(CRASH), agent="python -m harness.agents.wrong.fixed_session_id", evidence_root=tmp_path)
    assert not result.passed and not result.incomplete, render_result(result)
    assert result.agent_runs[0].killed_by_harness and "bubblewrap" in (result.sandbox or "")
    [finding] = result.verdict.by_code("H020")
    assert "carry session ses_agent of agent run 1, which the harness killed in its sandbox" in finding.message
    assert "a later process reused that session_id" in finding.message
