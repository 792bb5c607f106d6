"""Held, not exercised, failed: through the real plugin, a check that held only because the scenario never
reached it is reported as not exercised (text, verdict.json, JUnit, HTML), with the scenarios that would
exercise it; a scenario that reaches it says held; the catalogue run ends with its coverage line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.contract import VERDICT_JSON_FILE

KEY_CHECK = "H002 idempotency-key-reused"


@pytest.fixture
def run(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "250")
    evidence = tmp_path_factory.mktemp("evidence")

    def run(*args: str) -> tuple[pytest.RunResult, Path]:
        return pytester.runpytest_subprocess("--harness-evidence-dir", str(evidence), *args, timeout=180), evidence

    return run


def verdict_of(evidence: Path, scenario: str) -> dict:
    [folder] = [p for p in evidence.iterdir() if p.name.startswith(scenario + "-")]
    return json.loads((folder / VERDICT_JSON_FILE).read_text())


def test_a_vacuous_key_check_is_not_exercised_and_the_report_says_where_it_would_be(run, pytester) -> None:
    xml_path = pytester.path / "junit.xml"
    result, evidence = run("-v", f"--junitxml={xml_path}", "--scenario", "response_lost",
                           "--scenario", "response_lost_key_replay")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    # response_lost: the reference agent reconciles, never retries: the key-reuse check was never reached
    lost = verdict_of(evidence, "response_lost")
    assert lost["checks"][KEY_CHECK] == "not exercised"
    [op] = lost["operations"]
    assert KEY_CHECK in op["not_exercised"] and KEY_CHECK not in op["held"]
    # response_lost_key_replay: it retries with the same key, so the same check is exercised and holds
    replayed = verdict_of(evidence, "response_lost_key_replay")
    assert replayed["checks"][KEY_CHECK] == "held"
    # the text names the path not taken and the catalogue's scenarios that take it
    line = next(ln for ln in out.splitlines() if ln.startswith("PASS: ") and "not exercised by this scenario" in ln)
    assert "retry path: see " in line and "response_lost_key_replay" in line.split("retry path: see ", 1)[1], line
    # JUnit properties say the same per test case
    cases = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in ET.parse(xml_path).iter("testcase")}
    assert "H002" in cases["response_lost"]["checks_not_exercised"].split()
    assert "H002" in cases["response_lost_key_replay"]["checks_held"].split()
    assert cases["response_lost"]["checks_failed"] == ""
    # two scenarios: the session ends with how much of the model and the rules the agent was tested on
    result.stdout.re_match_lines([r"coverage: \d+/\d+ transitions of the operation model, \d+/\d+ checks exercised "
                                  r"over 2 run\(s\)"])


def test_a_failing_run_counts_its_failed_checks_and_the_html_page_lists_every_check(run) -> None:
    wrong = "python -m harness.agents.wrong.new_key_per_attempt"
    result, evidence = run("--scenario", "response_lost", "--agent", wrong)
    result.assert_outcomes(failed=1)
    verdict = verdict_of(evidence, "response_lost")
    assert verdict["checks"][KEY_CHECK] == "failed"
    result.stdout.re_match_lines([r"FAIL: \d+ checks failed; \d+ checks exercised and held"])
    [page] = list(evidence.glob("response_lost-*/report.html"))
    html = page.read_text()
    assert 'data-check="H002" data-said="failed"' in html
    assert 'data-said="not exercised"' in html  # e.g. the approval window: no approval in this scenario


def test_harness_run_says_the_same_and_its_json_carries_each_checks_word(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = [sys.executable, "-m", "harness", "run", "--evidence-dir", str(tmp_path)]
    text = subprocess.run([*base, "response_lost", "response_lost_key_replay"], capture_output=True, text=True,
                          timeout=180)
    assert text.returncode == 0, text.stderr
    assert "not exercised by this scenario (" in text.stdout
    assert "over 2 run(s)" in text.stdout.strip().splitlines()[-1]
    line = subprocess.run([*base, "response_lost", "--format", "json"], capture_output=True, text=True, timeout=180)
    assert json.loads(line.stdout)["checks"][KEY_CHECK] == "not exercised"
