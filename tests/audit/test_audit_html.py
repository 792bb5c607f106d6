"""``audit LOG --html PAGE`` shows the verdict the audit judged and wrote: the log is judged once (issue 31).

The audit keeps each operation's verdict as it judges it (``KeptVerdicts``) and the page is built from them;
what it keeps is what ``check(load_log(path), offline=True)`` finds, held here on every fixture and error
example, the checks each history held included.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import harness.audit.stream
import harness.checker
from harness import cli
from harness.audit import audit_file
from harness.audit.lines import load_log
from harness.audit.output import KeptVerdicts
from harness.checker import check
from tests.common.logs import write_log

HERE = Path(__file__).parent
FILES = sorted((HERE / "fixtures").glob("*.ndjson")) + sorted((HERE / "errors").glob("*.ndjson"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_what_the_audit_keeps_is_the_verdict_of_the_whole_log(path: Path) -> None:
    kept = KeptVerdicts(str(path))
    out = io.StringIO()
    summary = audit_file(path, format="json", out=out, keep=kept)
    verdict, whole = kept.verdict(), check(load_log(path), offline=True)
    by_id = sorted(verdict.to_dict()["operations"], key=lambda op: op["operation_id"])
    assert by_id == sorted(whole.to_dict()["operations"], key=lambda op: op["operation_id"])
    assert _texts(verdict.findings) == _texts(whole.findings)
    assert verdict.checks == whole.checks and verdict.passed == whole.passed
    assert [e["_line"] for e in kept.evidence.events] == [e["_line"] for e in load_log(path).events]
    # and the output is the audit's own, the same bytes as without keeping
    plain = io.StringIO()
    audit_file(path, format="json", out=plain, engine="stream")
    assert out.getvalue() == plain.getvalue() and summary.outcome in ("healthy", "unhealthy", "unusable")


def test_the_page_is_made_without_judging_the_log_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = write_log(tmp_path / "day.ndjson", seed=7, count=40)  # production-like: healthy and faulty operations
    operations = {json.loads(line)["operation_id"] for line in log.read_text().splitlines()
                  if line.strip() and "operation_id" in line}
    judged: list[str] = []
    real = harness.audit.stream.judge_operation

    def counting(op, *args, **kwargs):  # type: ignore[no-untyped-def]
        judged.append(op.operation_id)
        return real(op, *args, **kwargs)

    def refused(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the log was judged a second time for the page")

    monkeypatch.setattr(harness.audit.stream, "judge_operation", counting)
    monkeypatch.setattr(harness.checker, "check", refused)
    monkeypatch.setattr(harness.checker, "judge", refused)
    page = tmp_path / "audit.html"
    status = cli.main(["audit", str(log), "-q", "--html", str(page)])
    assert status == 1 and page.is_file()
    assert sorted(judged) == sorted(set(judged)) and set(judged) == operations  # each operation once
    assert 'data-verdict="FAILED"' in page.read_text(encoding="utf-8")


def test_a_page_of_a_spark_audit_is_refused_before_anything_runs(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["audit", str(FILES[0]), "--engine", "spark", "--html", str(tmp_path / "a.html")])
    assert status == 2 and not (tmp_path / "a.html").exists()
    err = capsys.readouterr().err
    assert "--engine spark" in err and "give --engine typed, stream or duckdb" in err and "Traceback" not in err


def _texts(findings: list[harness.checker.Finding]) -> list[str]:
    return sorted(json.dumps(f.to_dict(), sort_keys=True) for f in findings)
