"""H049, what a program without a log told its caller (its ``harness-report:`` lines on stdout) held against the
ledger: a connector that says "error" while the effect exists, or "success" with none, fails; one whose answer
is the truth, or an honest timeout, passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.checker import Verdict, check
from harness.contract import REPORT_PREFIX
from harness.evidence import load_evidence, read_reports
from harness.report import render_text
from tests.common.evidence_builder import EvidenceBuilder


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence").black_box()


def told(b: EvidenceBuilder, *reports: dict[str, Any], other: str = "int_1: -> whatever the connector prints\n"
         ) -> Verdict:
    """The story judged with the program's stdout: its own line, then each report."""
    folder = b.write()
    (folder / "agent.stdout").write_text(other + "".join(REPORT_PREFIX + json.dumps(r) + "\n" for r in reports))
    return check(load_evidence(folder))


def lost_then_nothing(b: EvidenceBuilder) -> None:
    """The SDK's one call committed and its answer was lost: the SDK raised, nothing retried."""
    b.intent()
    b.request(key=None, lost=True, effect="tkt_1")


def test_an_error_told_while_the_effect_exists_is_h049(b):
    lost_then_nothing(b)
    verdict = told(b, {"intent_id": "int_1", "outcome": "error"})
    [finding] = verdict.by_code("H049")
    assert not verdict.passed and finding.intent_id == "int_1"
    assert "reported an error to its caller for intent int_1 (agent.stdout line 2) while the destination " \
           "committed tkt_1" in finding.message
    assert "agent.stdout line 2: reported error" in render_text(verdict)


@pytest.mark.parametrize("outcome", ["timeout", "unknown"])
def test_a_timeout_or_an_unknown_told_while_the_effect_exists_is_honest(b, outcome: str):
    lost_then_nothing(b)
    assert told(b, {"intent_id": "int_1", "outcome": outcome}).passed


def test_the_last_report_is_what_the_caller_was_told(b):
    """A connector that reports each try: its error, then the success its retry with the same key got."""
    b.intent()
    b.request(lost=True, effect="tkt_1")
    b.request(effect="tkt_1", replay=True)
    verdict = told(b, {"intent_id": "int_1", "outcome": "error"},
                   {"intent_id": "int_1", "outcome": "success", "effect_ref": "tkt_1"})
    assert verdict.passed, render_text(verdict)


@pytest.mark.parametrize("report, words", [
    ({"intent_id": "int_1", "outcome": "success", "effect_ref": "tkt_1"}, "the destination committed no effect"),
    ({"intent_id": "int_1", "outcome": "success"}, "the destination committed no effect"),
])
def test_a_success_told_with_no_effect_is_h049(b, report: dict[str, Any], words: str):
    b.intent()
    b.request(key=None, status=500)  # failed before any commit
    [finding] = told(b, report).by_code("H049")
    assert words in finding.message


def test_a_success_naming_another_resource_is_h049(b):
    b.intent()
    b.request(effect="tkt_1")
    [finding] = told(b, {"intent_id": "int_1", "outcome": "success", "effect_ref": "tkt_9"}).by_code("H049")
    assert "reported success with tkt_9" in finding.message and "holds tkt_1" in finding.message


def test_without_a_report_line_nothing_is_judged_of_the_caller(b):
    lost_then_nothing(b)
    verdict = told(b)
    assert verdict.passed and not verdict.by_code("H049")


def test_report_lines_are_read_with_their_line_and_a_bad_one_says_why(tmp_path):
    stdout = tmp_path / "agent.stdout"
    stdout.write_text("\n".join(["chatter", REPORT_PREFIX + '{"intent_id": "a", "outcome": "success", '
                                 '"effect_ref": "x_1"}', REPORT_PREFIX + "{not json", REPORT_PREFIX
                                 + '{"intent_id": "a", "outcome": "failed"}']) + "\n")
    first, bad, unknown = read_reports(stdout, 1 << 20)
    assert first == {"intent_id": "a", "outcome": "success", "effect_ref": "x_1", "_line": 2}
    assert bad["_line"] == 3 and bad["problem"].startswith("not JSON")
    assert unknown["_line"] == 4 and "outcome (one of success, error, timeout, unknown)" in unknown["problem"]
    assert read_reports(tmp_path / "absent", 1 << 20) == []
