"""Issue 44 through the real harness: the planned crash cannot be dodged, nothing the agent starts outlives
its run, and what reaches the wire after the agent exited is a finding (H062). Each attack in the sandbox
(bubblewrap) and unsandboxed (``sandbox="off"``: its process group, then the contract environment found in
/proc), never PASS; each control PASSes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract import REFERENCE_AGENT
from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.sandbox import choose_sandbox
from harness.scenario import load

HERE = Path(__file__).parent
CRASH = load(catalogue_dir() / "crash_after_dispatch.yaml")
LOST = load(catalogue_dir() / "response_lost.yaml")
FLAWED = "harness.agents.wrong.new_id_after_restart"  # forgets its pending operation: only a crash shows it
SANDBOXES = [pytest.param("bwrap", marks=pytest.mark.skipif(not choose_sandbox("auto").confined,
                                                            reason="no bubblewrap here")), "off"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_worker_that_dodges_the_planned_crash_never_passes(tmp_path: Path, sandbox: str) -> None:
    """Before: the worker survived the kill, finished the work, and the restart found it done: PASS. Now the
    sandbox's kill takes the worker (the restart then shows the flaw: FAIL H001), and unsandboxed the worker is
    found by its environment and killed: INCOMPLETE."""
    result = run_scenario(CRASH, agent=f"python {HERE / 'dodger.py'} {FLAWED}", evidence_root=tmp_path,
                          sandbox=sandbox)
    text = render_result(result)
    assert not result.passed, text
    if sandbox == "bwrap":
        assert not result.incomplete and "H001" in result.verdict.codes, text
    else:
        assert result.incomplete and "outlived it" in result.incomplete[0], text
        assert "unsandboxed: turned off" in text


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_planned_crash_control_passes(tmp_path: Path, sandbox: str) -> None:
    result = run_scenario(CRASH, agent=f"python {HERE / 'dodger.py'} harness.agents.reference",
                          evidence_root=tmp_path, sandbox=sandbox)
    if sandbox == "bwrap":  # the worker died with the kill; the restarted reference agent reconciles
        assert result.passed, render_result(result)
    else:  # the same dodge, by a correct agent: still a process that outlived the kill
        assert result.incomplete, render_result(result)
    assert run_scenario(CRASH, evidence_root=tmp_path, sandbox=sandbox).passed


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_retry_after_the_agent_exited_is_a_finding(tmp_path: Path, sandbox: str) -> None:
    """A background retry 0.2 s after exit: in the sandbox the harness is still looking (H062, with the
    journal line or the ledger's); unsandboxed the worker left the group, and is found and killed (INCOMPLETE),
    unless on a loaded machine its retry left before the search found it, which is then H062 (both say it;
    neither passes)."""
    result = run_scenario(LOST, agent=f"python {HERE / 'late_retry.py'} 0.2", evidence_root=tmp_path,
                          sandbox=sandbox)
    text = render_result(result)
    assert not result.passed, text
    if sandbox == "bwrap":
        [finding] = result.verdict.by_code("H062")
        # the journal's line, or on a loaded machine (the exit seen late, the request reaching the proxy just
        # before it) the destination's own record of it, received after the exit
        assert "after the agent exited" in finding.message and finding.evidence[0]["source"] in ("journal", "ledger"), \
            text
    else:
        assert result.incomplete or result.verdict.by_code("H062"), text


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_retry_after_the_harness_stopped_looking_never_passes(tmp_path: Path, sandbox: str) -> None:
    """Retrying 3 s after exit, past the late window: the worker is killed before it acts, and the run says it
    cannot vouch for what it would have done (INCOMPLETE), sandbox or not."""
    result = run_scenario(LOST, agent=f"python {HERE / 'late_retry.py'} 3", evidence_root=tmp_path,
                          sandbox=sandbox)
    assert result.incomplete and not result.passed, render_result(result)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_late_retry_control_passes(tmp_path: Path, sandbox: str) -> None:
    result = run_scenario(LOST, agent=REFERENCE_AGENT, evidence_root=tmp_path, sandbox=sandbox)
    assert result.passed and not result.verdict.by_code("H062"), render_result(result)
    assert all(run.survivors == [] and run.left_running == 0 for run in result.agent_runs)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_exit_status_forged_on_the_supervisors_pipe_never_passes(tmp_path: Path, sandbox: str) -> None:
    """Before: a child of the agent wrote ``exited 0`` into the supervisor's status pipe after the real ``exited 3``
    (the harness believed the last line): PASS. Now the supervisor is not dumpable, so a process without
    CAP_SYS_PTRACE cannot open its fds (the sandbox's: FAIL on the agent's own status); one that can (unsandboxed,
    as root) is seen by the lines the supervisor never wrote: INCOMPLETE."""
    result = run_scenario(LOST, agent=f"python {HERE / 'status_forger.py'} forge", evidence_root=tmp_path,
                          sandbox=sandbox)
    text = render_result(result)
    said = (Path(result.evidence_dir) / "agent.stderr").read_text()
    assert not result.passed, text
    if "forged: written" in said:
        assert sandbox == "off" and result.incomplete, text
        assert "status pipe holds lines the supervisor never wrote" in result.incomplete[0], text
    else:
        assert "forged: refused (Permission denied)" in said, said
        assert not result.incomplete and result.agent_runs[0].exit_status == 3, text


def test_the_status_forger_control_fails_on_its_status(tmp_path: Path) -> None:
    result = run_scenario(LOST, agent=f"python {HERE / 'status_forger.py'}", evidence_root=tmp_path)
    assert not result.passed and not result.incomplete and result.agent_runs[0].exit_status == 3
    assert any("exited with status 3" in f.message for f in result.verdict.by_code("H063")), render_result(result)


@pytest.mark.skipif(not choose_sandbox("auto").confined, reason="no bubblewrap here")
def test_an_agent_cannot_end_its_supervisor_in_the_sandbox(tmp_path: Path) -> None:
    """The supervisor is the sandbox's init: the agent's SIGSTOP, SIGINT, SIGTERM and SIGKILL to it are sent and
    change nothing, so its report of the agent's exit (0) stands and the correct agent passes. Before, as the
    sandbox's second process, it died of the SIGKILL: no status, bubblewrap's 137, FAIL."""
    result = run_scenario(LOST, agent=f"python {HERE / 'supervisor_signaller.py'}", evidence_root=tmp_path,
                          sandbox="bwrap")
    said = (Path(result.evidence_dir) / "agent.stderr").read_text()
    assert "SIGKILL to 1: sent" in said, said
    assert result.passed and result.agent_runs[0].exit_status == 0, render_result(result)
