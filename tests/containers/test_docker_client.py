"""The engine: labels, start and remove, clear errors, the reaper after a SIGKILL, and `containers clean`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.containers import docker_client
from harness.errors import ContainerError

REAP_BOUND = 120.0  # seconds to wait for the reaper before calling it broken (it takes about one)
MISSING = "retry-harness/runtime:000000000000"

# A harness process in miniature: starts one container, one network and one volume through the API, says
# their names and its OWNER on one JSON line, then waits (to be killed, or for end of file on stdin).
CHILD = """
import json, sys
from harness.containers import docker_client as dc
image = sys.argv[1]
container = dc.start(image, role="agent", run="reaper-test", command=["sleep", "600"], network_mode="host")
network = dc.client().networks.create(f"rh-test-{dc.OWNER}", labels=dc.labels("service", "reaper-test"))
volume = dc.client().volumes.create(f"rh-test-{dc.OWNER}", labels=dc.labels("database", "reaper-test"))
print(json.dumps({"owner": dc.OWNER, "container": container.name, "network": network.name,
                  "volume": volume.name}), flush=True)
sys.stdin.read()
"""


def start_child(image: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, image], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"the child harness did not start its containers (exit {child.wait()})"
    return child, json.loads(line)


def wait_until_gone(owner: str) -> dict[str, list[str]]:
    deadline = time.monotonic() + REAP_BOUND
    while any((left := docker_client.ours(owner)).values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_labels_mark_ours_this_process_the_role_and_the_run() -> None:
    assert docker_client.labels("agent", "response_lost-1") == {
        "io.retry-harness": "1", "io.retry-harness.owner": docker_client.OWNER, "io.retry-harness.role": "agent",
        "io.retry-harness.run": "response_lost-1"}
    assert docker_client.labels("build")["io.retry-harness.run"] == ""
    assert docker_client.OWNER.split("-")[-2] == str(os.getpid())
    with pytest.raises(ValueError, match="unknown container role 'agnet'; one of agent, service"):
        docker_client.labels("agnet")


def test_a_started_container_is_ours_until_removed(runtime_image: str) -> None:
    container = docker_client.start(runtime_image, role="agent", run="t", command=["sleep", "600"],
                                    network_mode="host",
                             labels={"team.example": "kept"})
    try:
        assert container.status == "running"
        assert container.labels["io.retry-harness.owner"] == docker_client.OWNER
        assert container.labels["team.example"] == "kept"
        assert docker_client.ours(docker_client.OWNER)["containers"] == [container.name]
        row, = docker_client.listing(docker_client.OWNER)["containers"]
        assert (row["role"], row["run"], row["status"]) == ("agent", "t", "running")
    finally:
        docker_client.remove(container)
    docker_client.remove(container)  # already gone: fine
    assert docker_client.ours(docker_client.OWNER)["containers"] == []


def test_a_missing_image_names_it_and_how_to_make_it_and_nothing_is_started() -> None:
    with pytest.raises(ContainerError, match=f"image {MISSING} is not present .*python -m harness images build"
                                             ".*never pulls"):
        docker_client.start(MISSING, role="agent", run="t")
    with pytest.raises(ContainerError, match=r"image team/agent:dev is not present .*docker build -t team/agent:dev"
                                             r".*docker load"):
        docker_client.ensure_image("team/agent:dev")
    assert docker_client.ours(docker_client.OWNER)["containers"] == []


def test_a_container_that_cannot_start_is_a_clear_error_and_is_removed(runtime_image: str) -> None:
    with pytest.raises(ContainerError, match=f"cannot start the agent container from image {runtime_image}: .*"
                                             "/no/such/program"):
        docker_client.start(runtime_image, role="agent", run="t", command=["/no/such/program"])
    assert docker_client.ours(docker_client.OWNER)["containers"] == []


def test_no_engine_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent")
    with pytest.raises(ContainerError, match=r"no Docker engine answers at unix:///nonexistent: .*; start dockerd "
                                             r"\(or set DOCKER_HOST\)"):
        docker_client.connect()
    cli = subprocess.run([sys.executable, "-m", "harness", "containers", "list"], capture_output=True, text=True,
                         env={**os.environ, "DOCKER_HOST": "unix:///nonexistent"}, timeout=120)
    assert cli.returncode == 2, cli.stdout + cli.stderr
    assert cli.stderr.startswith("error: no Docker engine answers at unix:///nonexistent"), cli.stderr
    assert "Traceback" not in cli.stderr


def test_the_reaper_removes_what_a_sigkilled_harness_left(runtime_image: str) -> None:
    child, made = start_child(runtime_image)
    try:
        assert docker_client.ours(made["owner"]) == {"containers": [made["container"]], "networks": [made["network"]],
                                              "volumes": [made["volume"]]}
        child.send_signal(signal.SIGKILL)
        child.wait()
        left = wait_until_gone(made["owner"])
        assert not any(left.values()), f"the reaper left {left} of {made['owner']} after {REAP_BOUND:.0f} s"
    finally:
        child.kill()
        child.wait()
        docker_client.remove_ours(made["owner"])


def test_containers_clean_removes_ours_and_nothing_else(runtime_image: str) -> None:
    """Scoped to one owner with ``--owner``: unscoped, it would also remove what tests running beside this
    one (another xdist worker, another checkout on the same engine) are using."""
    child, made = start_child(runtime_image)
    theirs = docker_client.client().containers.create(runtime_image, command=["sleep", "600"])  # no label of ours
    try:
        listed = subprocess.run([sys.executable, "-m", "harness", "containers", "list", "--owner", made["owner"]],
                                capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, listed.stderr
        assert made["container"] in listed.stdout and made["network"] in listed.stdout
        assert theirs.name not in listed.stdout
        clean = subprocess.run([sys.executable, "-m", "harness", "containers", "clean", "--owner", made["owner"]],
                               capture_output=True, text=True, timeout=120)
        assert clean.returncode == 0, clean.stderr
        assert clean.stdout.splitlines() == [f"removed 1 containers: {made['container']}",
                                             f"removed 1 networks: {made['network']}",
                                             f"removed 1 volumes: {made['volume']}"]
        assert not any(docker_client.ours(made["owner"]).values())
        theirs.reload()
        assert theirs.status == "created"  # still there, untouched
        again = subprocess.run([sys.executable, "-m", "harness", "containers", "clean", "--owner", made["owner"]],
                               capture_output=True, text=True, timeout=120)
        assert again.stdout.strip() == "nothing of ours to remove"
    finally:
        theirs.remove(force=True)
        child.kill()
        child.wait()
        docker_client.remove_ours(made["owner"])
