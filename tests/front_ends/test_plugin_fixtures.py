"""The plugin's fixtures for a team's own tests: `run_scenario`, `harness_engine`,
`assert_scenario_passed` and `catalogue`, run for real in pytest subprocesses (pytester).

The README's example is run as it is written there (extracted from README.md), so it cannot drift.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.resources import catalogue_dir

README = Path(__file__).resolve().parents[2] / "docs" / "using.md"
WRONG = "python -m harness.agents.wrong."


def readme_example() -> dict[str, str]:
    """The README's fixture example: each ```python block between the markers, keyed by the file
    name its first line (`# NAME.py`) gives."""
    text = README.read_text()
    start, end = text.index("<!-- fixture-example:start -->"), text.index("<!-- fixture-example:end -->")
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], re.DOTALL)
    files = {}
    for block in blocks:
        first, _, _ = block.partition("\n")
        name = re.fullmatch(r"# (\w+\.py)", first)
        assert name, f"a README example block starts with '# FILE.py', not {first!r}"
        files[name.group(1)] = block
    return files


@pytest.fixture
def run(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "250")
    evidence = tmp_path_factory.mktemp("evidence")

    def run(*args: str, timeout: float = 180) -> pytest.RunResult:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--harness-evidence-dir", str(evidence),
                                               *args, timeout=timeout)
        result.evidence_dir = evidence  # type: ignore[attr-defined]
        return result

    return run


def test_the_readme_example_runs_as_written(run, pytester: pytest.Pytester) -> None:
    files = readme_example()
    assert set(files) == {"conftest.py", "test_retries.py"}
    for name, code in files.items():
        (pytester.path / name).write_text(code)
    result = run("-v", "-rA")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_a_lost_response_is_reconciled PASSED*",
                                 "*test_the_catalogue?response_lost? PASSED*",
                                 "*test_the_catalogue?rate_limited? PASSED*"])
    assert len(list(result.evidence_dir.glob("*/verdict.json"))) == 3


FAILING = f"""
from harness.pytest_plugin import assert_scenario_passed


def test_wrong_agent(run_scenario):
    assert_scenario_passed(run_scenario("response_lost", agent="{WRONG}new_key_per_attempt"))


def test_no_such_scenario(run_scenario):
    run_scenario("response_lots")
"""


def test_a_failing_run_reads_like_the_plugins_report_without_a_traceback(run, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_team=FAILING)
    xml_path = pytester.path / "junit.xml"
    result = run("-rf", f"--junitxml={xml_path}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*test_wrong_agent*",
        "H002 * H016 on op_*",
        "scenario response_lost with agent *new_key_per_attempt*: FAIL",
        "*FAIL H002 idempotency-key-reused*",
        "evidence: *",
        "*test_no_such_scenario*",
        "*no scenario 'response_lots'*Did you mean 'response_lost'?*",
        "*short test summary info*",
        "FAILED test_team.py::test_wrong_agent - Failed: H002 * H016 on op_*",
        "FAILED test_team.py::test_no_such_scenario - Failed: no scenario 'response_lots'*",
    ])
    out = result.stdout.str()
    assert "Traceback" not in out and "def test_" not in out and "During handling" not in out, out
    [case] = [c for c in ET.parse(xml_path).iter("testcase") if c.get("name") == "test_wrong_agent"]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["scenario"] == "response_lost" and "H002" in props["rule_codes"].split()


ENGINE = """
import harness
from harness.pytest_plugin import HarnessEngine, assert_scenario_passed

seen = []


def test_the_engine_is_one_per_session(harness_engine, run_scenario):
    assert isinstance(harness_engine, HarnessEngine)
    seen.append(harness_engine)
    scenario = harness.load_scenario(harness_engine.load("rate_limited").source)  # a Scenario object
    result = harness_engine.run(scenario)
    assert_scenario_passed(result)
    assert result.evidence_dir.parent == harness_engine.evidence_root.resolve()
    assert harness_engine.proxy.running and harness_engine.pool is harness_engine.pool


def test_again(harness_engine):
    assert seen == [harness_engine]
"""


def test_harness_engine_is_session_scoped_and_runs_scenario_objects(run, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_engine=ENGINE)
    run("-p", "no:randomly").assert_outcomes(passed=2)


def test_catalogue_gives_every_bundled_scenario_or_a_selection() -> None:
    from harness.pytest_plugin import catalogue

    every = catalogue()
    assert [p.id for p in every] == sorted(p.stem for p in catalogue_dir().glob("*.yaml"))
    assert all(Path(p.values[0]).is_file() for p in every)
    assert [p.id for p in catalogue("response_lost")] == ["response_lost"]
    assert [p.id for p in catalogue(["rate_limited", "response_lost_*"])] == [
        "rate_limited", "response_lost_key_replay", "response_lost_lookup_only", "response_lost_no_dedup_no_lookup"]
