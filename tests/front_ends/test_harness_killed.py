"""`kill -9` of `python -m harness run` at several moments of a run leaves no process and no temp
folder behind, and its evidence is never judged as if it were whole: `check` says INCOMPLETE (3).
Once the run is being served, the orphaned destination process saves its ledger into the evidence
folder (marked as recovered) before it goes.

Real processes throughout. Each moment is recognised from the outside (files, processes), never
by sleeping; every wait has a deadline, and whatever the test started is killed by pid at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.contract import AUDIT_LOG_ENV, EvidenceLayout

SCENARIO = Path(__file__).parents[1] / "engine" / "scenarios" / "lookup_delayed_15s.yaml"
EXIT_INCOMPLETE = 3
# a bound against a hang, not a speed check: the orphans (destinations saving the ledger, the supervisor) notice and
# go within seconds, but 20 s was passed once at a load of 7 with six workers on two cores
DEADLINE = 60.0
CALLER = "caller"  # the folder the harness is started from, hence the agent's working folder


def _proc_entries() -> Iterator[tuple[int, str, str, str, list[str]]]:
    """(pid, state, cmdline, cwd, environment) of every process we may read."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
            environ = (entry / "environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        yield int(entry.name), stat[stat.rindex(")") + 2], cmdline, cwd, environ


def processes_of(root: Path) -> list[int]:
    """Running (not zombie) processes whose command line or working folder lies under ``root``: the
    agent and its supervisor work in the caller's folder, the destinations read their config from
    the pool's folder under the run's TMPDIR."""
    here = str(root)
    return [pid for pid, state, cmdline, cwd, _ in _proc_entries()
            if state not in "ZX" and pid != os.getpid()
            and (here in cmdline or cwd == here or cwd.startswith(here + os.sep))]


def agent_processes(folder: Path) -> list[tuple[str, str]]:
    """(command line, working folder) of the running processes whose environment holds this evidence folder's
    audit log (the contract's HARNESS_AUDIT_LOG, in the environment the harness starts the agent with):
    bubblewrap from its start, the supervisor, the agent."""
    marker = f"{AUDIT_LOG_ENV}={EvidenceLayout(folder).agent_log}"
    return [(cmdline, cwd) for pid, state, cmdline, cwd, environ in _proc_entries()
            if state not in "ZX" and pid != os.getpid() and marker in environ]


def agent_cwds(folder: Path) -> set[str]:
    return {cwd for _, cwd in agent_processes(folder)}


def _cmdline(pid: int) -> str:
    try:
        return f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid}: gone"


def wait_for(condition: Callable[[], object], what: str, process: subprocess.Popen[bytes] | None = None,
             left: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the harness exited ({process.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE:g} s: {what}" + (f"; left: {left()}" if left else ""))
        time.sleep(0.01)


def evidence_folder(root: Path) -> Path | None:
    found = [p for p in root.glob("*/") if p.is_dir()]
    return found[0] if found else None


def before_the_agent_starts(root: Path, tmp: Path) -> bool:
    """The destination process runs (it reads its config from the pool's folder); no agent yet.

    (A kill in the few instructions between creating the pool's folder and starting that process
    leaves the folder to the next pool of the machine, which removes folders of dead harnesses.)"""
    folder = evidence_folder(root)
    return (folder is not None and EvidenceLayout(folder).context.exists() and bool(processes_of(tmp))
            and not EvidenceLayout(folder).agent_stdout.exists())


def while_the_agent_runs(root: Path, tmp: Path) -> bool:
    """The agent (found by its environment) runs under its supervisor, in the folder the harness was started from."""
    folder = evidence_folder(root)
    if folder is None or not EvidenceLayout(folder).agent_log.exists():
        return False
    cwds = agent_cwds(folder)
    assert cwds <= {str(root.parent / CALLER)}, f"the agent runs in {cwds}, not the caller's folder"
    return any("agent_supervisor" in command for command, _ in agent_processes(folder))


def while_the_sandbox_starts(root: Path, tmp: Path) -> bool:
    """The first process of the agent's run is there: bubblewrap, which carries the agent's environment from its
    start, while it makes the sandbox (its first child waits for its parent's word, which a parent killed with the
    harness never gives: containers/bubblewrap#633)."""
    folder = evidence_folder(root)
    return folder is not None and bool(agent_processes(folder))


def during_teardown(root: Path, tmp: Path) -> bool:
    """The agent resolved its operation and exited; the proxy is draining the delayed lookup (up to 10 s)."""
    folder = evidence_folder(root)
    if folder is None or not EvidenceLayout(folder).agent_log.exists():
        return False
    return '"resolution"' in EvidenceLayout(folder).agent_log.read_text() and not agent_cwds(folder)


@pytest.mark.parametrize("moment", [before_the_agent_starts, while_the_sandbox_starts, while_the_agent_runs,
                                    during_teardown],
                         ids=lambda m: m.__name__)
def test_kill_9_of_the_harness_leaves_nothing_behind_and_check_says_incomplete(
        tmp_path: Path, moment: Callable[[Path, Path], bool]) -> None:
    tmp, evidence, caller = tmp_path / "tmp", tmp_path / "evidence", tmp_path / CALLER
    tmp.mkdir()
    caller.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    harness = subprocess.Popen([sys.executable, "-m", "harness", "run", str(SCENARIO), "--evidence-dir", str(evidence)],
                               env=env, cwd=caller, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        wait_for(lambda: moment(evidence, tmp), moment.__name__, harness)
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        wait_for(lambda: not processes_of(tmp_path), "every process of the run is gone",
                 left=lambda: [_cmdline(pid) for pid in processes_of(tmp_path)])
        wait_for(lambda: not any(tmp.iterdir()), "the run's temp folders are removed")
        folder = evidence_folder(evidence)
        assert folder is not None
        check = subprocess.run([sys.executable, "-m", "harness", "check", str(folder)], capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == EXIT_INCOMPLETE, check.stdout + check.stderr
        assert check.stdout.startswith("INCOMPLETE: the harness lost evidence") and "FAIL" not in check.stdout
        if moment is not before_the_agent_starts:  # the run was being served: its ground truth was kept
            ledger = json.loads(EvidenceLayout(folder).ledger_dump.read_text())
            assert ledger["recovered_by"].startswith("the destination process"), ledger
            assert "effect ledger: saved by the destination process" in check.stdout, check.stdout
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait(10)
        for pid in processes_of(tmp_path):  # only what this test started, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
