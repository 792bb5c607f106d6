"""A run that did not finish is INCOMPLETE with its reason, never judged; what the run signed is held to
its signature (issue 30). Real runs through the CLI and the pytest plugin, stopped as a user or a CI
runner stops them (SIGINT, SIGTERM, Ctrl-C twice), and folders changed after the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.contract import CHECKPOINT_KEY_FILE_ENV, CHECKPOINTS_KEY, COMPLETENESS_KEY, EvidenceLayout
from tests.front_ends.test_incomplete_evidence import EXIT_INCOMPLETE, evidence_folder, harness

# an agent that says it is up, then works for a long time and will not stop on SIGTERM: a second signal
# lands while the harness waits for it to go (agent_process.KILL_GRACE_SECONDS), never after the run ended
SLOW_AGENT = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("agent up", file=sys.stderr, flush=True)
time.sleep(60)
"""


def slow_agent(tmp_path: Path) -> tuple[str, str]:
    """The agent's command and a token unique to it, to find any of its processes left behind."""
    token = uuid.uuid4().hex
    path = tmp_path / f"slow_{token}.py"
    path.write_text(SLOW_AGENT)
    return f"python {path}", token


def start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # a signal to it is to it alone, as a CI runner's


def wait_for_agent(evidence_root: Path, process: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for stderr in evidence_root.glob("*/agent.stderr"):
            if "agent up" in stderr.read_text():
                return stderr.parent
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.05)
    raise AssertionError("the agent never started")


def left_behind(token: str) -> list[str]:
    """Processes of the run still alive: the agent (by its token), destination processes of the run."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if token in cmdline:
                found.append(f"{proc.name}: {cmdline}")
    return found


def gone(token: str, within: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within
    while (still := left_behind(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return still


def mark(folder: Path) -> dict[str, object]:
    return json.loads(EvidenceLayout(folder).context.read_text())[COMPLETENESS_KEY]


@pytest.mark.parametrize(("sig", "said", "status"), [
    (signal.SIGINT, "SIGINT (Ctrl-C)", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_a_run_stopped_by_a_signal_is_incomplete_with_the_reason(tmp_path: Path, sig: signal.Signals, said: str,
                                                                 status: int) -> None:
    agent, token = slow_agent(tmp_path)
    evidence = tmp_path / "ev"
    run = start([sys.executable, "-m", "harness", "run", "response_lost", "--agent", agent, "--evidence-dir",
                 str(evidence)], tmp_path)
    try:
        folder = wait_for_agent(evidence, run)
        run.send_signal(sig)
        out, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == status, out
    assert f"interrupted: the run was stopped by {said}; its evidence is kept in {folder}" in out, out
    assert "Traceback" not in out, out
    assert mark(folder)["complete"] is False and mark(folder)["interrupted"] == said
    assert EvidenceLayout(folder).ledger_dump.exists()  # what the run had is saved all the same
    check = harness("check", str(folder))
    assert check.returncode == EXIT_INCOMPLETE, check.stdout + check.stderr
    assert f"the run was stopped before its end by {said}" in check.stdout, check.stdout
    assert "FAIL" not in check.stdout and "PASSED" not in check.stdout
    assert gone(token) == []


def test_ctrl_c_twice_stops_pytest_at_once_without_a_traceback(tmp_path: Path) -> None:
    """The first Ctrl-C stops the agent and saves the evidence; the second, while the harness waits for an
    agent that ignores SIGTERM, stops at once: one line, no traceback, and nothing of the run left running
    (what the harness started sees it gone, as after a kill -9). The folder says why the run stopped."""
    agent, token = slow_agent(tmp_path)
    evidence = tmp_path / "ev"
    run = start([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                 "--agent", agent, "--harness-evidence-dir", str(evidence)], tmp_path)
    try:
        folder = wait_for_agent(evidence, run)
        run.send_signal(signal.SIGINT)
        time.sleep(0.5)  # inside the agent's 2 s of grace
        assert run.poll() is None
        began = time.monotonic()
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=60)
        stopped_within = time.monotonic() - began
    finally:
        run.kill()
    assert run.returncode == 130, out
    assert "SIGINT (Ctrl-C) again: stopping now" in out and "Traceback" not in out, out
    assert stopped_within < 1.5, stopped_within  # before the grace it would otherwise have waited out
    assert gone(token) == [], "the agent outlived the harness"
    assert mark(folder)["interrupted"] == "SIGINT (Ctrl-C)"
    check = harness("check", str(folder))
    assert check.returncode == EXIT_INCOMPLETE and "stopped before its end by SIGINT" in check.stdout, check.stdout


def finished_run(tmp_path: Path, env: dict[str, str] | None = None) -> EvidenceLayout:
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--evidence-dir",
                          str(tmp_path / "ev"), "--format", "json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert run.returncode == 0, run.stdout + run.stderr
    layout = EvidenceLayout(evidence_folder(run))
    assert set(json.loads(layout.context.read_text())[COMPLETENESS_KEY][CHECKPOINTS_KEY].values()) == {
        "agent.checkpoint.json", "agent.trace.checkpoint.json", "ledger.checkpoint.json", "journal.checkpoint.json"}
    return layout


def edit_the_log(layout: EvidenceLayout) -> None:
    """As someone hiding an attempt would: one event cut out."""
    lines = layout.agent_log.read_text().splitlines(keepends=True)
    layout.agent_log.write_text("".join(lines[:-2] + lines[-1:]))


@pytest.mark.parametrize("checkpoint", ["agent.checkpoint.json", "ledger.checkpoint.json"])
def test_a_checkpoint_the_run_made_and_is_gone_is_missed(tmp_path: Path, checkpoint: str) -> None:
    layout = finished_run(tmp_path)
    (layout.folder / checkpoint).unlink()
    edit_the_log(layout)
    check = harness("check", str(layout.folder))
    assert check.returncode == EXIT_INCOMPLETE, check.stdout + check.stderr
    if checkpoint == "agent.checkpoint.json":
        assert "agent log: its signed checkpoint agent.checkpoint.json, which the run made, is missing" \
            in check.stdout, check.stdout
    else:  # the log's own checkpoint still catches its edit; the ledger's absence is named beside it
        assert "effect ledger: its signed checkpoint ledger.checkpoint.json, which the run made, is missing" \
            in check.stdout, check.stdout


def test_under_the_operators_key_the_logs_checkpoint_is_required_whatever_the_context_says(tmp_path: Path) -> None:
    """Whoever deletes the checkpoint can also take it off context.json's list: the operator's key, which
    they do not hold, still demands it."""
    key = tmp_path / "operator.key"
    key.write_text("k" * 32)
    layout = finished_run(tmp_path, {CHECKPOINT_KEY_FILE_ENV: str(key)})
    layout.checkpoint.unlink()
    context = json.loads(layout.context.read_text())
    del context[COMPLETENESS_KEY][CHECKPOINTS_KEY]
    layout.context.write_text(json.dumps(context))
    edit_the_log(layout)
    check = harness("check", str(layout.folder), "--key-file", str(key))
    assert check.returncode == EXIT_INCOMPLETE, check.stdout + check.stderr
    assert "agent.checkpoint.json, which the run made, is missing" in check.stdout, check.stdout


def test_a_ledger_edited_in_the_folder_after_the_run_is_not_judged(tmp_path: Path) -> None:
    layout = finished_run(tmp_path)
    assert harness("check", str(layout.folder)).returncode == 0
    ledger = json.loads(layout.ledger_dump.read_text())
    ledger["effects"].append({**ledger["effects"][0], "seq": 2})  # a duplicate that never happened
    layout.ledger_dump.write_text(json.dumps(ledger, indent=2))
    check = harness("check", str(layout.folder))
    assert check.returncode == EXIT_INCOMPLETE, check.stdout + check.stderr
    assert "effect ledger: not the ledger.json the harness saved at the end of the run" in check.stdout
    assert "H015" not in check.stdout and "H016" not in check.stdout
