"""The harness's side in a container, as docker/compose.yaml declares it, run through the SDK (this machine
has no `docker compose`; with it, `docker compose run` reads the same file): the harness image on the host's
network, the engine's socket and the evidence folder mounted at the same path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.containers import docker_client
from harness.contract import EvidenceLayout

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"
WAIT = 600  # seconds the run in the container may take before the test calls it stuck
_VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}``, in every string of ``value``."""
    if isinstance(value, dict):
        return {interpolate(k, env): interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, how, word = match.groups()
        if env.get(name):
            return env[name]
        if how == "?":
            raise AssertionError(f"compose.yaml needs {name}: {word}")
        return word if how == "-" else ""

    return _VARIABLE.sub(one, value)


def compose_service(env: dict[str, str]) -> dict[str, Any]:
    return dict(interpolate(yaml.safe_load(COMPOSE.read_text())["services"]["harness"], env))


def sdk_options(service: dict[str, Any]) -> dict[str, Any]:
    """The compose service as ``containers.create`` options (the keys compose.yaml uses, no others)."""
    assert set(service) <= {"image", "pull_policy", "network_mode", "volumes", "working_dir", "labels", "command"}
    volumes = {}
    for mount in service["volumes"]:
        source, target = mount.split(":")
        volumes[source] = {"bind": target, "mode": "rw"}
    return {"network_mode": service["network_mode"], "volumes": volumes, "working_dir": service["working_dir"],
            "labels": service["labels"], "command": service["command"]}


def test_the_compose_file_is_the_harness_image_with_socket_and_evidence_at_the_same_path(tmp_path: Path) -> None:
    service = compose_service({"EVIDENCE_DIR": str(tmp_path), "AGENT_IMAGE": "team/agent:dev"})
    assert service["image"] == "retry-harness/harness:latest" and service["pull_policy"] == "never"
    assert service["network_mode"] == "host"
    assert service["volumes"] == ["/var/run/docker.sock:/var/run/docker.sock", f"{tmp_path}:{tmp_path}"]
    assert service["command"] == ["run", "response_lost", "--evidence-dir", str(tmp_path),
                                  "--agent-image", "team/agent:dev"]
    with pytest.raises(AssertionError, match="compose.yaml needs AGENT_IMAGE"):
        compose_service({"EVIDENCE_DIR": str(tmp_path)})


def test_the_harness_image_runs_a_scenario_beside_the_engine(tmp_path: Path, harness_image: str) -> None:
    """The compose service with the bundled process agent inside the harness container: `--agent-image`
    (the agent in a container of its own) comes with the agents' branch, and then the compose file's own
    command runs unchanged (docs/containers.md)."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    service = compose_service({"EVIDENCE_DIR": str(evidence), "AGENT_IMAGE": "unused",
                               "HARNESS_IMAGE": harness_image})
    options = sdk_options(service)
    options["command"] = options["command"][:options["command"].index("--agent-image")] + ["--format", "json"]
    container = docker_client.start(service["image"], role="harness", run="test_harness_side", **options)
    try:
        status = container.wait(timeout=WAIT)["StatusCode"]
        output, errors = container.logs(stderr=False).decode(), container.logs(stdout=False).decode()
    finally:
        docker_client.remove(container)
    assert status == 0, output + errors
    result = json.loads(output)  # one JSON line per scenario
    assert result["scenario"] == "response_lost" and result["passed"] is True, result
    folder, = evidence.iterdir()
    assert result["evidence"] == str(folder)  # the path inside the container is the host's
    layout = EvidenceLayout(folder)
    assert json.loads(layout.context.read_text())["evidence"]["complete"] is True
    assert layout.agent_log.stat().st_size > 0 and layout.journal.stat().st_size > 0


@pytest.mark.skipif(shutil.which("docker") is None or subprocess.run(
    ["docker", "compose", "version"], capture_output=True).returncode != 0, reason="no `docker compose` here")
def test_docker_compose_reads_the_file(tmp_path: Path) -> None:
    check = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True,
                           env={**os.environ, "EVIDENCE_DIR": str(tmp_path), "AGENT_IMAGE": "team/agent:dev"})
    assert check.returncode == 0, check.stderr
