"""The offline audit finds what the scenario checker finds in the same log, minus the rules that need the wire.

On every fixture and error example, on every rule's story (tests/checker/test_rules.py, the log its
evidence folder holds) and on random production-like logs, ``run_audit`` (streaming, JSON) and
``check(load_log(path), offline=True)`` (the whole log at once) give the same operations and the same
findings, message for message. The one legitimate difference is the audit's window: a line for an
operation the window already judged is reported instead of judged (the last test).
"""

from __future__ import annotations

import ast
import io
import json
from collections import Counter
from pathlib import Path

import pytest

import harness.audit
from harness.audit.lines import load_log
from harness.audit.output import NOT_AUDITED
from harness.checker import RULES, check
from harness.cli import run_audit
from tests.checker.test_rules import STORIES
from tests.common.evidence_builder import EvidenceBuilder
from tests.common.logs import late_observation_log, write_log

HERE = Path(__file__).parent
FILES = sorted((HERE / "fixtures").glob("*.ndjson")) + sorted((HERE / "errors").glob("*.ndjson"))
WIRE_RULES = {code for code, r in RULES.items() if "wire" in r.requires}


def audited(path: Path, **kwargs) -> dict:
    out = io.StringIO()
    run_audit(path, format="json", out=out, err=io.StringIO(), **kwargs)
    return json.loads(out.getvalue())


def findings_of(data: dict) -> Counter:
    """Every finding of an audit's JSON (run-wide and per operation), or of a verdict's, as JSON text."""
    findings = data["findings"] + [f for op in data["operations"] for f in op["findings"]] \
        if "summary" in data else data["findings"]
    return Counter(json.dumps(f, sort_keys=True) for f in findings)


def sorted_ops(data: dict) -> list[dict]:
    """The operations by id: the stream lists them as it judges them, the others by their first line."""
    return sorted(data["operations"], key=lambda op: op["operation_id"])


def checked(path: Path) -> dict:
    verdict = json.loads(json.dumps(check(load_log(path), offline=True).to_dict()))
    for op in verdict["operations"]:
        for key in NOT_AUDITED:  # the audit does not list the rules that held, nor what the run exercised
            op.pop(key)
    return verdict


def assert_same_judgement(path: Path) -> None:
    """Every local engine (the stream, DuckDB's triage and the typed one, each with the rules for the rest) judges
    as check() does."""
    verdict = checked(path)
    for engine in ("stream", "duckdb", "typed"):
        audit = audited(path, engine=engine)
        assert sorted_ops(audit) == sorted_ops(verdict), (path, engine)
        assert findings_of(audit) == findings_of(verdict), (path, engine)
        assert not {json.loads(f)["code"] for f in findings_of(audit)} & WIRE_RULES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixtures_and_error_examples(path):
    assert_same_judgement(path)


@pytest.mark.parametrize("flawed", [False, True], ids=["right", "flawed"])
@pytest.mark.parametrize("code", sorted(STORIES))
def test_every_rules_story(tmp_path, code, flawed):
    b = EvidenceBuilder(tmp_path / "evidence")
    STORIES[code](b, flawed)
    assert_same_judgement(b.write() / "agent.ndjson")


@pytest.mark.parametrize("seed", range(6))
def test_random_logs_of_every_kind_of_story(tmp_path, seed):
    """Clean, retried, blind, open, undeclared operations and secrets, interleaved, with malformed and blank
    lines (tests/common/logs.py); the article's lines mixed with ours for one of them."""
    log = write_log(tmp_path / "agent.ndjson", seed, count=40)
    if seed == 0:
        log.write_text((HERE / "fixtures" / "article_four_operations.ndjson").read_text() + log.read_text())
    assert_same_judgement(log)


def test_the_audit_names_no_rule_of_its_own():
    """Codes and names come from the registry: no rule's code or name is written in the audit's source."""
    words = set(RULES) | {r.name for r in RULES.values()}
    for source in sorted((Path(harness.audit.__file__).parent).glob("*.py")):
        tree = ast.parse(source.read_text())
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & words, (source.name, sorted(literals & words))


def test_the_window_is_the_one_difference(tmp_path):
    """A line for an operation the window already judged: the audit reports it (H000) and judged the
    operation without it; check(), which holds the whole log, judges it in place."""
    log = late_observation_log(tmp_path / "agent.ndjson", operations=4)
    audit, verdict = audited(log, window=2, engine="stream"), checked(log)
    extra = findings_of(audit) - findings_of(verdict)
    assert [json.loads(f)["message"] for f in extra] == [
        (f"{log}:13: observation for op_0 comes after that operation was resolved and 2 more were; it was judged "
         f"without this line")]
    assert not findings_of(verdict) - findings_of(audit)
    assert audit["operations"][1:] == verdict["operations"][1:]
    assert verdict["operations"][0]["observations"] and not audit["operations"][0]["observations"]
    assert audited(log, engine="stream")["operations"] == verdict["operations"]  # a wide window sees it in place
    for engine in ("duckdb", "typed"):  # here the embedded engines judge op_0 whole (the rules see no other between)
        audit = audited(log, window=2, engine=engine)
        assert sorted_ops(audit) == sorted_ops(verdict) and findings_of(audit) == findings_of(verdict), engine
