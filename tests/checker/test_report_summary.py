"""A verdict of many findings is summarised in the text report (counts per rule, the first of each rule and the
first ones in full, what was left out) and whole in verdict.json / --format json. A small verdict reads as it
always did."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checker import check
from harness.evidence import load_evidence
from harness.limits import BLOCKS_SHOWN, FINDINGS_SHOWN
from harness.report import render_failure_line, render_text, summarised
from tests.browser.synthetic import build


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 operations, 280 findings over six rules (the synthetic stories)."""
    return build(tmp_path_factory.mktemp("large") / "ev", 200)


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=120)


def test_many_findings_are_counted_per_rule_and_the_first_of_each_shown_in_full(large: Path) -> None:
    verdict = check(load_evidence(large))
    assert len(verdict.findings) > FINDINGS_SHOWN and summarised(verdict)
    text = render_text(verdict)
    counted = {m.group(1): int(m.group(2).replace(",", ""))
               for m in re.finditer(r"^  (H\d{3}) \S+ +([\d,]+) finding\(s\)", text, re.MULTILINE)}
    expected: dict[str, int] = {}
    for finding in verdict.findings:
        expected[finding.code] = expected.get(finding.code, 0) + 1
    assert counted == expected  # every rule, every finding counted
    fails = re.findall(r"^  FAIL (H\d{3}) ", text, re.MULTILINE)
    assert set(fails) == set(expected)  # an example of each rule, with its evidence
    assert FINDINGS_SHOWN <= len(fails) < len(verdict.findings)
    assert "     - log line " in text  # evidence of the findings shown
    shown_ops = re.findall(r"^operation (\S+) ", text, re.MULTILINE)
    assert 0 < len(shown_ops) < len(verdict.operations)
    left = int(re.search(r"^not shown: ([\d,]+) finding\(s\)", text, re.MULTILINE).group(1).replace(",", ""))
    assert left + len(fails) == len(verdict.findings)
    assert "verdict.json has them all" in text


def test_the_json_verdict_keeps_every_finding(large: Path) -> None:
    verdict = check(load_evidence(large))
    done = harness("check", str(large), "--format", "json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert len(data["findings"]) == len(verdict.findings)
    assert sum(len(op["findings"]) for op in data["operations"]) == len(verdict.findings)
    assert len(data["operations"]) == 200


def test_findings_shown_chooses_how_many_and_zero_shows_all(large: Path) -> None:
    verdict = check(load_evidence(large))
    everything = render_text(verdict, shown=0)
    assert not summarised(verdict, 0) and "findings per rule" not in everything
    assert len(re.findall(r"^  FAIL ", everything, re.MULTILINE)) == len(verdict.findings)
    assert len(re.findall(r"^operation ", everything, re.MULTILINE)) == 200
    done = harness("check", str(large), "--findings-shown", "40")
    assert done.returncode == 1
    assert "then the first ones up to 40" in done.stdout
    assert len(re.findall(r"^  FAIL ", done.stdout, re.MULTILINE)) >= 40
    assert "FAIL" not in harness("check", str(large), "--findings-shown", "-1").stdout
    assert harness("check", str(large), "--findings-shown", "-1").returncode == 2


def test_a_small_verdict_is_not_summarised(tmp_path: Path) -> None:
    verdict = check(load_evidence(build(tmp_path / "ev", 5)))  # 7 findings, 5 operations
    assert not summarised(verdict)
    text = render_text(verdict)
    assert "findings per rule" not in text and "not shown" not in text
    assert len(re.findall(r"^operation ", text, re.MULTILINE)) == 5


def test_many_clean_operations_are_counted_not_listed(tmp_path: Path) -> None:
    from tests.common.evidence_builder import EvidenceBuilder

    b = EvidenceBuilder(tmp_path / "ev")
    for n in range(BLOCKS_SHOWN + 1):
        op, intent, key = f"op_{n}", f"int_{n}", f"idem-{n}"
        payload = {"title": f"t {n}", "client_reference": intent}
        b.intent(intent, params=payload)
        b.operation(op, intent, key=key)
        b.events[-1]["intent"]["params"] = payload
        b.attempt(op, f"att_{n}", "response_received", key=key, payload=payload, effect=f"tkt_{n}",
                  attempt_number=1, attempt_budget_remaining=2)
        b.resolution(op, "succeeded", effects=[f"tkt_{n}"], evidence=[f"att_{n}"])
    verdict = check(load_evidence(b.write()))
    assert verdict.passed and summarised(verdict)
    text = render_text(verdict)
    assert text.startswith(f"verdict: PASSED ({BLOCKS_SHOWN + 1} operation(s), 0 finding(s))")
    assert "^operation " not in text and re.search(r"^operation ", text, re.MULTILINE) is None
    assert f"not shown: 0 finding(s), {BLOCKS_SHOWN + 1} operation(s) ({BLOCKS_SHOWN + 1} of them held every check)" \
        in text


def test_the_failure_line_lists_the_first_operations_and_counts_the_rest(large: Path) -> None:
    from harness.results import ScenarioResult

    verdict = check(load_evidence(large))
    result = ScenarioResult("s", "a", False, verdict, large, [], {}, [])
    line = render_failure_line(result)
    assert line.count(" on op_") == FINDINGS_SHOWN
    with_problems = len({f.operation_id for f in verdict.findings})
    assert f"and {with_problems - FINDINGS_SHOWN:,} more (findings per rule: H002 " in line
    assert render_failure_line(result, shown=0).count(" on op_") == with_problems


def test_a_verdict_read_back_from_json_is_summarised_alike(large: Path) -> None:
    """The pytest controller and `report FOLDER` render a verdict read back from verdict.json."""
    from harness.checker import Verdict

    verdict = check(load_evidence(large))
    again = Verdict.from_dict(json.loads(json.dumps(verdict.to_dict(), default=str)))
    assert render_text(again) == render_text(verdict)
    assert re.search(r"^operation ", render_text(again), re.MULTILINE)


def test_a_failing_operation_with_one_effect_never_reads_healthy(tmp_path: Path) -> None:
    """The classification counts effects ("healthy": one), it is no verdict: the text and the HTML say the
    operation's own FAIL first and the count in words; the JSON keeps the field and its value."""
    from harness.html_report import write_html_report
    from tests.common.evidence_builder import EvidenceBuilder

    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_budget_remaining=2)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=[])  # cites nothing: H015
    verdict = b.check()
    [op] = verdict.operations
    assert op.findings and op.classification == "healthy" and verdict.to_dict()["operations"][0]["classification"] \
        == "healthy"
    text = render_text(verdict)
    assert "healthy" not in text and f"verdict: FAIL ({len(op.findings)} finding" in text, text
    assert "effects: tkt_1 (no duplicate effect)" in text, text
    [page_path, *_] = write_html_report(tmp_path / "report.html", verdict, evidence=load_evidence(b.write()))
    page = page_path.read_text()
    assert '<b class="op-verdict">FAIL</b>' in page and "classification: <b" not in page
    assert '<td class="cls-healthy">no duplicate effect</td>' in page  # the index's effects column
