"""Issue 44's attacks on the evidence, through the real engine: each gets INCOMPLETE (or FAIL), never PASS, and
its control (the same run, not attacked) gets the verdict it deserves."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from fake_destinations.host import DestinationPool
from harness import engine, interrupt
from harness.chain import run_key_path
from harness.cli import main
from harness.contract import CHECKPOINT_KEY_FILE_ENV, COMPLETENESS_KEY, EvidenceLayout
from harness.engine import run_scenario
from harness.evidence import load_evidence
from harness.proxy.host import ProxyHost
from harness.resources import catalogue_dir
from harness.scenario import load

ATTACK = f"{sys.executable} -m tests.common.attack_agents.evidence"
REFERENCE = f"{sys.executable} -m harness.agents.reference"


@pytest.fixture(autouse=True)
def unsandboxed(monkeypatch) -> None:
    """The harness's own defences (seals, safe files, a teardown that saves the ledger) are what these attacks
    test: unsandboxed, as where no sandbox can be had, since the sandbox keeps the agent from the evidence
    folder, the proxy and the ledger before any of them is needed (tests/sandbox, and the control-plane tests)."""
    monkeypatch.setenv("HARNESS_SANDBOX", "off")


@pytest.fixture(scope="module")
def pool():
    pool = DestinationPool()
    yield pool
    pool.close()


def run(pool, tmp_path: Path, agent: str, scenario: str = "response_lost"):
    return run_scenario(load(catalogue_dir() / f"{scenario}.yaml"), agent=agent, evidence_root=tmp_path, pool=pool)


def check(folder: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["check", str(folder), *extra])
    return status, capsys.readouterr().out


def test_a_rewritten_journal_is_not_the_proxys(pool, tmp_path: Path) -> None:
    control = run(pool, tmp_path, f"{sys.executable} -m harness.agents.wrong.retry_after_unread", "rate_limited")
    assert not control.passed and not control.incomplete and "H011" in control.verdict.codes
    attacked = run(pool, tmp_path, f"{ATTACK} journal", "rate_limited")
    assert attacked.incomplete and not attacked.passed
    assert any(gap.startswith("proxy journal: not the journal the fault proxy wrote") for gap in attacked.incomplete)


def test_a_junk_journal_line_loses_no_ledger(pool, tmp_path: Path) -> None:
    result = run(pool, tmp_path, f"{ATTACK} journal-junk")
    assert result.incomplete and not result.passed
    assert EvidenceLayout(result.evidence_dir).ledger_dump.is_file()  # the ledger was saved all the same
    assert result.facts.get("effects", 1) == 1


def test_symlinks_at_the_harness_names_redirect_nothing(pool, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = run(pool, tmp_path / "runs", f"{ATTACK} symlinks {outside}")
    assert list(outside.iterdir()) == []  # nothing was written through a link
    folder = Path(result.evidence_dir)
    assert not any((folder / name).is_symlink() for name in ("context.json", "ledger.json", "verdict.json"))
    assert not (folder / "checkpoint.key").exists() or (folder / "checkpoint.key").is_symlink()
    assert result.passed, result.verdict.codes  # the reference agent, judged on what the harness wrote


@pytest.mark.parametrize("mode", ["fifo-log", "sparse-log"])
def test_a_log_that_is_no_regular_file_or_a_giant_is_refused_at_once(pool, tmp_path: Path, mode: str, capsys) -> None:
    began = time.monotonic()
    result = run(pool, tmp_path, f"{ATTACK} {mode}")
    assert result.incomplete and not result.passed
    assert any(gap.startswith("agent log: ") for gap in result.incomplete), result.incomplete
    status, out = check(Path(result.evidence_dir), capsys)
    assert status == 3 and "agent log" in out
    assert time.monotonic() - began < 30  # no read of a FIFO nor of 1 GiB


def test_fifos_at_the_agents_outputs_hang_nothing(pool, tmp_path: Path, capsys) -> None:
    """Before: the restarted agent's stdout, opened again to append, waited for a reader of the FIFO for ever, and
    so did the read of the stderr's tail. Now a FIFO there is replaced, and not read: the run and a later check
    end, judged (the reference agent: PASS)."""
    result = run(pool, tmp_path, f"{ATTACK} fifo-outputs", "crash_after_dispatch")
    assert result.passed and len(result.agent_runs) == 2, result.verdict.codes
    assert check(Path(result.evidence_dir), capsys)[0] == 0


def test_a_deep_tree_in_the_state_dir_is_removed_with_a_passed_run(pool, tmp_path: Path) -> None:
    """Before: removing a passed run's folder (keep_evidence "failed") recursed into the agent's 1200-deep tree and
    raised RecursionError, leaving the folder and its key store entry behind. The sandbox gives the agent its state
    dir too: the harness's own removal is what is tested here."""
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=f"{ATTACK} deep-state",
                          evidence_root=tmp_path, pool=pool, keep_evidence="failed")
    assert result.passed and not result.evidence_kept, result.verdict.codes  # control: the reference agent's work
    assert list(tmp_path.iterdir()) == [] and not run_key_path(result.evidence_dir).exists()


def test_no_key_in_the_folder_and_a_later_edit_is_refused(pool, tmp_path: Path, capsys) -> None:
    result = run(pool, tmp_path, f"{sys.executable} -m harness.agents.wrong.new_key_per_attempt")
    folder = Path(result.evidence_dir)
    assert not result.passed and not result.incomplete
    assert not (folder / "checkpoint.key").exists()
    assert run_key_path(folder).stat().st_mode & 0o777 == 0o600
    layout = EvidenceLayout(folder)
    assert check(folder, capsys)[0] == 1  # control: the folder as the run left it, judged again
    context = json.loads(layout.context.read_text())
    del context[COMPLETENESS_KEY]  # attack 3: no completeness mark, one effect gone
    layout.context.write_text(json.dumps(context))
    ledger = json.loads(layout.ledger_dump.read_text())
    ledger["effects"] = ledger["effects"][:1]
    layout.ledger_dump.write_text(json.dumps(ledger))
    status, out = check(folder, capsys)
    assert status == 3 and "context: not the context.json the run's teardown wrote" in out, out


def test_report_does_not_print_an_edited_verdict(pool, tmp_path: Path, capsys) -> None:
    result = run(pool, tmp_path, f"{sys.executable} -m harness.agents.wrong.new_key_per_attempt")
    layout = EvidenceLayout(Path(result.evidence_dir))
    capsys.readouterr()
    assert main(["report", str(layout.folder)]) == 1  # control: the run's own, sealed verdict
    verdict = json.loads(layout.verdict_json.read_text())
    verdict["passed"] = True
    layout.verdict_json.write_text(json.dumps(verdict))
    capsys.readouterr()
    status = main(["report", str(layout.folder)])
    out = capsys.readouterr().out
    assert status == 1 and "untrusted" in out, out


def test_under_the_operator_key_a_folder_without_a_mark_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    key = tmp_path / "operator.key"
    key.write_text("k" * 32)
    folder = tmp_path / "hand-built"
    folder.mkdir()
    (folder / "context.json").write_text(json.dumps({"scenario": "x"}))
    (folder / "agent.ndjson").write_text("")
    assert check(folder, capsys)[0] != 3  # control: judged as it is, without the key
    monkeypatch.setenv(CHECKPOINT_KEY_FILE_ENV, str(key))
    status, out = check(folder, capsys)
    assert status == 3 and "refused" in out, out


def test_a_signal_during_the_teardown_leaves_the_folder_incomplete(pool, tmp_path: Path, monkeypatch) -> None:
    real = engine._writes_in_progress

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # held by interrupt.deferred until the folder is written
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_writes_in_progress", signalled)
    monkeypatch.setattr(interrupt, "_STATE", interrupt._State())  # this process goes on after the signal
    handlers = {sig: signal.getsignal(sig) for sig in interrupt.SIGNALS}
    try:
        with pytest.raises(interrupt.Interrupted):
            run(pool, tmp_path, REFERENCE)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert EvidenceLayout(folder).ledger_dump.is_file()
    gaps = load_evidence(folder).incomplete
    assert any("stopped before its end by SIGTERM" in gap for gap in gaps), gaps


def test_a_stopped_proxy_gives_incomplete_and_the_ledger(pool, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(engine, "PROXY_FINISH_SECONDS", 0.2)
    proxy = ProxyHost.shared()
    began = time.monotonic()
    result = run(pool, tmp_path, f"{ATTACK} stop-proxy {proxy.process.pid}")
    assert time.monotonic() - began < 20
    assert result.incomplete and not result.passed
    assert any("the fault proxy did not finish" in gap for gap in result.incomplete), result.incomplete
    assert EvidenceLayout(Path(result.evidence_dir)).ledger_dump.is_file()
    assert not proxy.running and ProxyHost.shared().running  # the next run gets a new proxy
    assert run(pool, tmp_path, REFERENCE).passed


def test_escape_codes_from_the_log_are_not_printed_raw(pool, tmp_path: Path) -> None:
    result = run(pool, tmp_path, f"{ATTACK} escape")
    text = EvidenceLayout(Path(result.evidence_dir)).verdict_text.read_text()
    assert not result.passed
    assert "\x1b" not in text and "\r" not in text and "\\x1b" in text
    assert not any(line.strip() == "verdict: PASSED" for line in text.splitlines())
    assert "\u202e" not in text and "\u200b" not in text and "\\u202eDELIAF\\u200b" in text
    # the page shows the same id the same way: visible escapes, no override a browser would draw
    page = (Path(result.evidence_dir) / "report.html").read_text(encoding="utf-8")
    assert "\u202e" not in page and "\u200b" not in page and "\x1b" not in page
    assert "\\u202eDELIAF\\u200b" in page


def test_a_neighbour_probing_a_destination_does_not_fail_the_agent(pool, tmp_path: Path) -> None:
    scenario = load(catalogue_dir() / "response_lost.yaml")
    host = pool.acquire(scenario.destinations)  # the process the run gets back: its ports
    ports = list(host.ports.values())
    done = threading.Event()

    def neighbour() -> None:  # another process of the machine (here: the harness's own, never the agent)
        while not done.is_set():
            for port in ports:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                        conn.sendall(b"GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        conn.recv(4096)
                except OSError:
                    pass
            time.sleep(0.05)

    prober = threading.Thread(target=neighbour, daemon=True)
    prober.start()
    try:
        result = run_scenario(scenario, agent=REFERENCE, evidence_root=tmp_path, pool=pool)
    finally:
        done.set()
        prober.join()
    refused = [r for r in json.loads(EvidenceLayout(Path(result.evidence_dir)).ledger_dump.read_text())["requests"]
               if r["outcome"] == "rejected"]
    assert refused and all(r["sender"] == "other" for r in refused), refused
    assert result.passed, [f.message for f in result.verdict.findings]


def test_no_harness_removes_a_pool_folder_a_live_destination_process_holds(tmp_path: Path) -> None:
    """After a kill -9 of its harness, an orphaned destination process still finishing a write holds its folder's
    live lock: a harness starting meanwhile (``remove_dead_pools``) leaves that folder, and its ledger, alone."""
    import subprocess

    from fake_destinations.host import POOL_PREFIX, remove_dead_pools

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    owned = tmp_path / f"{POOL_PREFIX}{gone.pid}-abc" / "host-1-x"
    owned.mkdir(parents=True)
    (owned / "ledger.sqlite").write_bytes(b"live")
    orphan = subprocess.Popen([sys.executable, "-c", "import sys, time; from fake_destinations.runtime import "
                               "hold_live_lock; hold_live_lock(sys.argv[1]); print('held', flush=True); "
                               "time.sleep(60)", str(owned)], stdout=subprocess.PIPE)
    try:
        assert orphan.stdout is not None and orphan.stdout.readline() == b"held\n"
        remove_dead_pools(tmp_path)
        assert (owned / "ledger.sqlite").read_bytes() == b"live"
    finally:
        orphan.kill()
        orphan.wait()
    remove_dead_pools(tmp_path)  # control: once the process is gone, the folder is the dead harness's litter
    assert not owned.parent.exists()
