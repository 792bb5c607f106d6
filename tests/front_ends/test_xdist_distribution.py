"""A catalogue run spread by pytest-xdist's own mechanisms: execution environments given by `--tx` (two
popen workers, as an ssh one is given) and the `loadgroup` and `worksteal` schedulers.

Each run is a real pytest subprocess (pytester: its own folder, HOME, --basetemp and evidence root) over
six bundled scenarios with the reference agent and two copies given wrong agents, so the run must say
exactly those two failed: a worker's warm destinations and proxy, reused from one scenario to the next,
carry nothing from a failing run into a passing one, and no verdict lands on another scenario's item.
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.resources import catalogue_dir

PASSING = ["response_lost", "rate_limited", "request_lost", "async_accepted", "payload_changed",
           "timeout_late_success"]
# a copy of a bundled scenario under another name, its agent a wrong one, and the rules that catch it
# (harness/expected_outcomes.yaml)
WRONG = {"response_lost_new_key": ("response_lost", "new_key_per_attempt", {"H002", "H016"}),
         "rate_limited_blind_backoff": ("rate_limited", "blind_backoff", {"H011"})}
WORKER_LINE = re.compile(r"^\[(gw\d+)\] \[ *\d+%\] (PASSED|FAILED) (\S+)", re.MULTILINE)

DISTRIBUTIONS = {
    "loadgroup": ["--tx", "popen", "--tx", "popen", "--dist", "loadgroup"],
    "worksteal": ["--tx", f"2*popen//python={sys.executable}", "--dist", "worksteal"],
}


def write_wrong_copies(folder: Path) -> None:
    folder.mkdir()
    for name, (base, agent, _codes) in WRONG.items():
        text = (catalogue_dir() / f"{base}.yaml").read_text(encoding="utf-8")
        assert f"\nname: {base}\n" in text and "\nagent:" not in text
        text = text.replace(f"\nname: {base}\n", f"\nname: {name}\nagent: python -m harness.agents.wrong.{agent}\n")
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")


def junit_cases(junit: Path) -> dict[str, dict]:
    """scenario name -> its JUnit testcase: outcome and properties."""
    cases = {}
    for case in ET.parse(junit).iter("testcase"):
        failure = case.find("failure")
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        cases[case.get("name")] = {"failed": failure is not None, "error": case.find("error") is not None,
                                   "message": failure.get("message", "") if failure is not None else "",
                                   "properties": properties}
    return cases


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_a_catalogue_spread_over_two_tx_workers_runs_each_scenario_once_in_a_folder_of_its_own(
        run_plugin, pytester: pytest.Pytester, monkeypatch, dist: str) -> None:
    # the outer suite may itself run under xdist: the inner run is a session of its own, not one of its workers
    for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(variable, raising=False)
    write_wrong_copies(pytester.path / "scenarios")  # <rootdir>/scenarios: found by name
    junit = pytester.path / "junit.xml"
    selected = [*PASSING, *WRONG]
    result = run_plugin("-p", "xdist", *DISTRIBUTIONS[dist], "-v", "--junitxml", str(junit),
                        *[arg for name in selected for arg in ("--scenario", name)], timeout=300)
    out = result.stdout.str()
    result.assert_outcomes(passed=len(PASSING), failed=len(WRONG))

    # every item ran once, on one of the two workers, and each worker ran some
    ran = WORKER_LINE.findall(out)
    by_item = {nodeid.rsplit("::", 1)[1]: worker for worker, _outcome, nodeid in ran}
    assert sorted(by_item) == sorted(selected) and len(ran) == len(selected), out
    assert set(by_item.values()) == {"gw0", "gw1"}, by_item

    cases = junit_cases(junit)
    assert sorted(cases) == sorted(selected)
    for name in PASSING:
        assert not cases[name]["failed"] and not cases[name]["error"], (name, cases[name])
    for name, (_base, agent, codes) in WRONG.items():
        case = cases[name]
        assert case["failed"] and not case["error"], (name, case)
        assert codes <= set(case["properties"]["rule_codes"].split()), (name, case)
        assert case["properties"]["agent"].endswith(f"harness.agents.wrong.{agent}")

    # one evidence folder per scenario, none shared, each holding that scenario's run and verdict
    folders = {name: Path(case["properties"]["evidence_dir"]) for name, case in cases.items()}
    assert len(set(folders.values())) == len(selected)
    assert sorted(result.evidence_dir.iterdir()) == sorted(folders.values())
    for name, folder in folders.items():
        context = json.loads((folder / "context.json").read_text())
        verdict = json.loads((folder / "verdict.json").read_text())
        assert context["scenario"] == name and context["evidence"]["complete"] is True
        assert verdict["passed"] is (name in PASSING), (name, verdict["findings"])
