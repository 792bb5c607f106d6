"""Issue 44: a fork bomb meets a ceiling (``harness.sandbox.pids_ceiling``, a pids cgroup of ``AGENT_PIDS_LIMIT``
tasks), sandboxed or not, not only the run's time limit; the cgroup is gone once the run ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.agent_process import run_agent
from harness.contract import AUDIT_LOG_ENV
from harness.sandbox import AGENT_PIDS_LIMIT, choose_sandbox, pids_ceiling

BOMB = Path(__file__).parent / "fork_bomb.py"


def _forked(output: str) -> int:
    return int(output.split("forked ")[-1].split()[0])


def test_the_ceiling_stops_a_fork_bomb_and_leaves_no_cgroup() -> None:
    with pids_ceiling(limit=8) as (prefix, said):
        if not prefix:
            pytest.skip(f"no pids cgroup can be made here: {said}")
        folder = Path(prefix[-1]).parent
        bounded = subprocess.run([*prefix, sys.executable, str(BOMB), "20"], capture_output=True, text=True,
                                 timeout=60)
        assert folder.is_dir() and "at most 8 processes" in said
    # the shell became the bomb (exec): it and its children are the cgroup's 8 tasks at most
    assert _forked(bounded.stdout) <= 7, bounded.stdout + bounded.stderr
    assert not folder.exists()  # its sleeping children were killed with it, then it was removed
    # the control: the same bomb outside the cgroup forks all 20 (so the bound above is the ceiling's)
    free = subprocess.Popen([sys.executable, str(BOMB), "20"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        output, _ = free.communicate(timeout=60)
        assert _forked(output) == 20, output
    finally:
        os.killpg(free.pid, signal.SIGKILL)  # its sleeping children, in its process group

@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=pytest.mark.skipif(
    not choose_sandbox("auto").confined, reason="no bubblewrap here")), "off"])
def test_an_agent_run_holds_at_most_the_ceiling(tmp_path: Path, sandbox: str) -> None:
    """Through the real process runner (bubblewrap, and unsandboxed): a bomb asking for more than the ceiling gets
    fewer, and the run's sandbox line says the ceiling."""
    log = tmp_path / "agent.ndjson"
    run = run_agent(f"python {BOMB} {AGENT_PIDS_LIMIT + 50}", {AUDIT_LOG_ENV: str(log)}, timeout=60,
                    stdout=tmp_path / "out", stderr=tmp_path / "err", sandbox=choose_sandbox(sandbox))
    if "no process ceiling" in (run.sandbox or ""):
        pytest.skip(run.sandbox)
    assert f"at most {AGENT_PIDS_LIMIT} processes" in (run.sandbox or "")
    assert _forked((tmp_path / "out").read_text()) < AGENT_PIDS_LIMIT, (tmp_path / "err").read_text()
