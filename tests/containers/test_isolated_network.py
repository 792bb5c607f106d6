"""An agent you did not write, in a container of its own network (``agent: {image, network: isolated}``): it
reaches the fault proxy and the scenario's SSH hosts and nothing else of the host's loopback, and still does
its work; on the host's network the same probe reaches everything (so the test can tell the two apart)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from harness.engine import run_scenario
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import ContainerAgent, load

# tries each port on 127.0.0.1, says what it got (one JSON line on stdout), then does the reference agent's work
PROBE_THEN_WORK = """
import json, runpy, socket, sys
for port in sys.argv[1:]:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
        said = "connected"
    except OSError as exc:
        said = type(exc).__name__
    print(json.dumps({"port": int(port), "got": said}), flush=True)
sys.argv = ["reference"]
runpy.run_module("harness.agents.reference", run_name="__main__")
"""


@pytest.fixture
def host_port():
    """A server of the host's that no scenario names: what an isolated agent must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


@pytest.mark.parametrize("name", ["response_lost", "ssh_chain_dropped", "mcp_tool_result_lost"])
def test_the_reference_agent_in_an_isolated_network_passes(tmp_path: Path, runtime_image: str, name: str) -> None:
    agent = ContainerAgent(image=runtime_image, command=["python3", "-m", "harness.agents.reference"],
                           network="isolated")
    result = run_scenario(load(catalogue_dir() / f"{name}.yaml"), agent=agent, evidence_root=tmp_path)
    assert result.passed, render_result(result)


@pytest.mark.parametrize("network", ["isolated", "host"])
def test_an_isolated_agent_reaches_the_proxy_and_nothing_else_of_the_host(tmp_path: Path, runtime_image: str,
                                                                          host_port: int, network: str) -> None:
    agent = ContainerAgent(image=runtime_image, command=["python3", "-c", PROBE_THEN_WORK, str(host_port)],
                           network=network)
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=agent, evidence_root=tmp_path)
    probes = [json.loads(line) for line in (Path(result.evidence_dir) / "agent.stdout").read_text().splitlines()
              if line.startswith("{")]
    assert probes == [{"port": host_port, "got": "ConnectionRefusedError" if network == "isolated" else "connected"}]
    assert result.passed, render_result(result)  # through the proxy its work is done all the same
