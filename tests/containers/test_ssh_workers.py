"""A catalogue spread over real remote workers: `pytest --scenario ... --tx ssh=... --tx ssh=...` into two
containers running sshd (harness.containers.ssh_workers), each with the harness installed at a path of its own,
neither the controller's.

The controller is a real pytest subprocess (pytester: its own folder, HOME and evidence root) that reaches the
workers through OpenSSH and execnet, as it would reach two CI machines. Four bundled scenarios run with the
reference agent and must pass; two copies of bundled ones, a team's own under `scenarios/` (in the controller's
folder and in each worker's copy of it), are given deliberately wrong agents and must FAIL on their worker and be
reported failing on the controller. Every run's evidence folder must come back into the controller's evidence
root, where `python -m harness check` judges it again, and none may stay behind on a worker.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.containers import docker_client
from harness.containers.ssh_workers import SSHWorkers
from harness.resources import catalogue_dir
from tests.containers.test_docker_client import REAP_BOUND, wait_until_gone
from tests.front_ends.test_xdist_distribution import WORKER_LINE, WRONG, junit_cases, write_wrong_copies

PASSING = ["response_lost", "rate_limited", "request_lost", "payload_changed"]
INSTALLS = ["/opt/ci-a/venv", "/srv/worker-b/env"]  # neither is the controller's, nor each other's
CHECK_TIMEOUT = 120.0


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """The team's checkout: its own scenarios, on the controller and copied to each worker."""
    write_wrong_copies(pytester.path / "scenarios")
    return pytester.path


@pytest.fixture
def workers(project: Path) -> SSHWorkers:
    with SSHWorkers(INSTALLS, project=project) as made:
        yield made


def leftovers_on(workers: SSHWorkers) -> dict[str, str]:
    """Evidence folders a worker kept (its private root is removed once its session ends)."""
    found = {}
    for worker in workers.workers:
        _code, out = worker.container.exec_run(["sh", "-c", "ls -d /tmp/retry-harness-evidence-* 2>/dev/null"])
        if out.strip():
            found[worker.name] = out.decode()
    return found


def test_a_catalogue_over_two_ssh_workers_fails_the_wrong_agents_and_brings_every_runs_evidence_back(
        pytester: pytest.Pytester, monkeypatch, workers: SSHWorkers, tmp_path_factory) -> None:
    for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(variable, raising=False)  # the outer suite's own xdist run is not this one
    junit = pytester.path / "junit.xml"
    selected = [*PASSING, *WRONG]
    tx = [arg for spec in workers.tx_specs() for arg in ("--tx", spec)]
    evidence_root = tmp_path_factory.mktemp("evidence").resolve()
    # paths as NAME=VALUE: xdist rewrites a separate argument naming an existing path relative to its rsync roots
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--evidence-dir={evidence_root}", "-p", "xdist",
                                           *tx, "--dist", "load", "-v", f"--junitxml={junit}",
                                           *[f"--scenario={name}" for name in selected], timeout=600)
    out = result.stdout.str()
    result.assert_outcomes(passed=len(PASSING), failed=len(WRONG))

    # each worker started in its own install's folder, ran some, and every item ran once
    for install in INSTALLS:
        assert re.search(rf"^\[gw\d\] .*cwd: {re.escape(install)}-work$", out, re.MULTILINE), out
    ran = WORKER_LINE.findall(out)
    by_item = {nodeid.rsplit("::", 1)[1]: worker for worker, _outcome, nodeid in ran}
    assert sorted(by_item) == sorted(selected) and len(ran) == len(selected), out
    assert set(by_item.values()) == {"gw0", "gw1"}, by_item
    # node ids that name no machine's path: the bundled catalogue's, and the rootdir-relative team ones
    nodeids = {nodeid for _worker, _outcome, nodeid in ran}
    assert {f"harness/scenarios/{name}.yaml::{name}" for name in PASSING} <= nodeids, nodeids
    assert {f"scenarios/{name}.yaml::{name}" for name in WRONG} <= nodeids, nodeids

    cases = junit_cases(junit)
    assert sorted(cases) == sorted(selected)
    for name, (_base, agent, codes) in WRONG.items():
        case = cases[name]
        assert case["failed"] and not case["error"], (name, case)
        assert codes <= set(case["properties"]["rule_codes"].split()), (name, case)
        assert case["properties"]["agent"].endswith(f"harness.agents.wrong.{agent}")
    for name in PASSING:
        assert not cases[name]["failed"] and not cases[name]["error"], (name, cases[name])

    # every run's folder is in the controller's evidence root, where its JUnit property and the report point
    folders = {name: Path(case["properties"]["evidence_dir"]) for name, case in cases.items()}
    assert sorted(evidence_root.iterdir()) == sorted(folders.values())
    assert "retry-harness-evidence-" not in out, "a worker's own path reached the controller's report"
    for name in WRONG:
        assert f"evidence: {folders[name]}" in out, out
    for name, folder in folders.items():
        context = json.loads((folder / "context.json").read_text())
        verdict = json.loads((folder / "verdict.json").read_text())
        assert context["scenario"] == name and context["evidence"]["complete"] is True
        assert verdict["passed"] is (name in PASSING), (name, verdict["findings"])
        # judged again here, from the folder alone: the same verdict
        check = subprocess.run([sys.executable, "-m", "harness", "check", str(folder)], capture_output=True,
                               text=True, timeout=CHECK_TIMEOUT)
        assert check.returncode == (0 if name in PASSING else 1), (name, check.stdout, check.stderr)
    assert leftovers_on(workers) == {}


HANGS = "worker_lost"  # its agent waits until its machine is gone
HANGING_AGENT = "python -c 'import time; time.sleep(600)'"


def wait_for_agent(workers: SSHWorkers, deadline: float) -> int:
    """The index of the worker whose container runs the hanging agent, once it runs."""
    while time.monotonic() < deadline:
        for index, worker in enumerate(workers.workers):
            code, _out = worker.container.exec_run(["pgrep", "-f", "time.sleep\\(600\\)"])
            if code == 0:
                return index
        time.sleep(0.2)
    raise AssertionError(f"no worker started the agent of {HANGS}")


def test_a_worker_machine_lost_mid_run_fails_its_scenario_and_each_one_left_unrun_none_lost(
        pytester: pytest.Pytester, monkeypatch, project: Path, tmp_path_factory) -> None:
    text = (catalogue_dir() / "response_lost.yaml").read_text(encoding="utf-8")
    text = text.replace("\nname: response_lost\n", f"\nname: {HANGS}\nagent: \"{HANGING_AGENT}\"\n"
                        "agent_timeout_seconds: 600\n")
    (project / "scenarios" / f"{HANGS}.yaml").write_text(text, encoding="utf-8")
    for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(variable, raising=False)
    evidence_root = tmp_path_factory.mktemp("evidence").resolve()
    junit = pytester.path / "junit.xml"
    selected = [HANGS, *PASSING]
    with SSHWorkers(INSTALLS, project=project) as workers:
        tx = [arg for spec in workers.tx_specs() for arg in ("--tx", spec)]
        controller = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                     f"--evidence-dir={evidence_root}", "-p", "xdist", *tx, "--dist", "load", "-v",
                                     f"--junitxml={junit}", *[f"--scenario={name}" for name in selected]],
                                    stdin=subprocess.DEVNULL)
        try:
            lost = wait_for_agent(workers, time.monotonic() + 300)
            workers.kill(lost)
            out, err = (stream.decode() for stream in controller.communicate(timeout=600))
        finally:
            if controller.poll() is None:
                controller.kill()
                controller.wait()
    assert controller.returncode == pytest.ExitCode.TESTS_FAILED, (out, err)
    assert "INTERNALERROR" not in out + err, out + err
    # the scenario it ran is reported crashed; none is lost: each one the session did not reach fails, saying so
    assert re.search(rf"worker 'gw{lost}' crashed while running '.*{HANGS}.yaml::{HANGS}'", out), out
    cases = junit_cases(junit)
    assert sorted(cases) == sorted(selected), (sorted(cases), out)
    assert cases[HANGS]["failed"] or cases[HANGS]["error"], cases[HANGS]
    passed = {nodeid.rsplit("::", 1)[1] for _worker, outcome, nodeid in WORKER_LINE.findall(out) if outcome == "PASSED"}
    unrun = {name for name, case in cases.items() if case["message"].startswith("not run: the session stopped when "
                                                                                f"worker gw{lost} ")}
    assert passed | unrun == set(PASSING) and not passed & unrun, (passed, unrun, out)
    for name in passed:
        assert not cases[name]["failed"] and Path(cases[name]["properties"]["evidence_dir"]).parent == evidence_root
    for name in unrun:
        assert cases[name]["failed"], cases[name]


# A harness in miniature that made one ssh worker: says its OWNER, key folder and container, then waits to be killed.
CHILD = """
import json, sys
from harness.containers import docker_client
from harness.containers import docker_client
from harness.containers.ssh_workers import SSHWorkers
workers = SSHWorkers(["/opt/killed/venv"]).__enter__()
print(json.dumps({"owner": docker_client.OWNER, "folder": str(workers.folder),
                  "container": workers.workers[0].container.name}), flush=True)
sys.stdin.read()
"""


def test_a_harness_killed_with_its_workers_up_leaves_neither_containers_nor_keys() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"the child harness did not start its worker (exit {child.wait()})"
        made = json.loads(line)
        assert docker_client.ours(made["owner"])["containers"] == [made["container"]]
        assert (Path(made["folder"]) / "id_ed25519").is_file()
        child.send_signal(signal.SIGKILL)
        child.wait()
        left = wait_until_gone(made["owner"])  # the reaper: containers by their owner label, the folder they name
        assert not any(left.values()), f"the reaper left {left} of {made['owner']}"
        deadline = time.monotonic() + REAP_BOUND
        while Path(made["folder"]).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(made["folder"]).exists(), f"the key folder {made['folder']} outlived its containers"
    finally:
        child.kill()
        child.wait()
        if "made" in locals():
            docker_client.remove_ours(made["owner"])
