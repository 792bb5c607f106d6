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
import subprocess
import sys
from pathlib import Path

import pytest

from harness.containers.ssh_workers import SSHWorkers
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
