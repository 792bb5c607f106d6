"""Issue 44 in a container, through the real engine, proxy and destinations: the agent writes its own places and
nothing else of the evidence folder, nor of the image, with no capabilities and a bounded number of processes; what
it leaves running gets the late window (a retry then is H062), and one still running after it makes the run
INCOMPLETE; what it sends past the fault proxy is the agent's (H061), though its processes descend from the engine,
not from the harness. One hostile agent (``hostile_agent.py``), one run a mode; ``none`` is the control."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fake_destinations.host import DestinationPool
from harness.agent_process import LATE_WINDOW_SECONDS
from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.sandbox import AGENT_PIDS_LIMIT
from harness.scenario import ContainerAgent, load

HOSTILE = (Path(__file__).parent / "hostile_agent.py").read_text()
MINE = ("log", "trace", "state dir", "tmp")
MARK = "the-agent-was-here"  # what hostile_agent.py writes wherever it can
SCENARIO = load(catalogue_dir() / "response_lost.yaml")


@pytest.fixture
def pool():
    pool = DestinationPool()
    yield pool
    pool.close()


@pytest.mark.parametrize("mode", ["none", "late", "survivor", "bypass"])
def test_a_hostile_agent_in_a_container(tmp_path: Path, runtime_image: str, pool: DestinationPool,
                                        mode: str) -> None:
    port = pool.acquire(SCENARIO.destinations).ports["tickets"]  # the run gets this process back, reset
    agent = ContainerAgent(image=runtime_image, command=["python3", "-c", HOSTILE, mode, str(port)])
    result = run_scenario(SCENARIO, agent=agent, evidence_root=tmp_path, pool=pool)
    text = render_result(result)
    layout = EvidenceLayout(Path(result.evidence_dir))
    said = [json.loads(line) for line in layout.agent_stdout.read_text().splitlines() if line.startswith("{")]
    tries = {s["try"]: s["got"] for s in said if "try" in s}
    # its own places are written; the harness's context is not there to read, nor any file of the folder but its own
    assert {k: tries[k] for k in MINE} == dict.fromkeys(MINE, "done"), tries
    assert tries["read context.json"] == "FileNotFoundError" and tries["image"] != "done", tries
    [listing] = [s["listing"] for s in said if "listing" in s]
    assert set(listing) <= {layout.agent_log.name, layout.trace.name, layout.state_dir.name, layout.intents.name}
    # on the host, what it wrote is in its state dir alone (elsewhere it reached its private /tmp, at most)
    marked = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and MARK.encode() in p.read_bytes()]
    assert marked == [layout.state_dir.relative_to(tmp_path) / "mine.txt"], marked
    # no capabilities, no new privileges, a bounded number of processes, the harness's user
    [privileges] = [s["privileges"] for s in said if "privileges" in s]
    assert privileges == {"ids": [os.getuid(), os.getgid()], "CapEff": "0000000000000000", "NoNewPrivs": "1",
                          "pids.max": str(AGENT_PIDS_LIMIT)}, privileges
    [run] = result.agent_runs
    assert run.sandbox and run.sandbox.startswith("container (Docker): own PID namespace"), run.sandbox
    if mode == "none":
        assert result.passed and run.left_running == 0 and run.survivors == [], text
    elif mode == "late":  # the harness still looks: the retry is on the wire after the exit, and named
        [finding] = result.verdict.by_code("H062")
        assert "after the agent exited" in finding.message and finding.evidence[0]["source"] == "journal", text
        assert run.left_running == 1 and run.survivors == []
    elif mode == "survivor":  # killed when the window closed, before it acted: the run cannot say what it did
        assert result.incomplete and not result.passed, text
        assert any(f"still running {LATE_WINDOW_SECONDS:g} s after the agent exited" in gap
                   for gap in result.incomplete), result.incomplete
    else:  # refused at the gate, and laid at the agent's door: its container's process sent it
        assert tries["bypass"] == 403, tries
        [finding] = result.verdict.by_code("H061")
        assert "POST /tickets" in finding.message and "bypassed the fault proxy" in finding.message, text
        assert result.facts["effects"] == 1, result.facts  # its own ticket, through the proxy
