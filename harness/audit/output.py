"""What the audit returns and writes: one operation's JSON verdict, and the summary at the end."""

from __future__ import annotations

import json
from typing import Any, TextIO

import orjson
from pydantic_core import to_json

from harness.checker import Finding, Verdict, run_verdict
from harness.evidence import Evidence
from harness.report import render_audit_summary
from harness.results.audit import AuditSummary
from harness.results.verdict import OperationVerdict


def write_summary(summary: AuditSummary, format: str, out: TextIO) -> None:
    """The end of the audit's output: run-wide findings and the counts (closing the JSON document)."""
    if format == "json":
        out.write("\n  ],\n  \"findings\": " + json.dumps([f.to_dict() for f in summary.run_findings]) +
                  ",\n  \"summary\": " + json.dumps(summary.to_dict()) + "\n}\n")
    else:
        out.write(render_audit_summary(summary))


def json_text(data: dict[str, Any], *, careful: bool = False) -> str:
    """Compact JSON of one operation's verdict: orjson, 3x faster than pydantic_core's encoder and the
    same bytes (a property test holds it) for what the fast path vouched for: strings, 64-bit integers,
    booleans, no float anywhere. An operation with a ``careful`` line (coerced by pydantic, or in the
    article's unvalidated format) may hold infinity (orjson writes null) or a huge integer (orjson
    refuses it): pydantic_core writes those, as before."""
    if not careful:
        try:
            return orjson.dumps(data).decode()
        except orjson.JSONEncodeError:
            pass
    return to_json(data).decode()


# what a scenario's verdict says of each check (harness.checker.history's replay), which the audit does not judge
NOT_AUDITED = ("held", "not_exercised", "transitions")


def operation_json(verdict: OperationVerdict) -> dict[str, Any]:
    data = verdict.to_dict()
    for key in NOT_AUDITED:
        data.pop(key, None)
    return data


class KeptVerdicts:
    """What an audit keeps when asked (``audit --html``): each operation's verdict as the audit judged it and
    the events it read, for a page that shows that verdict without judging the log again
    (``harness.checker.run_verdict`` of ``operations`` and the summary's run-wide findings)."""

    def __init__(self, name: str) -> None:
        self.evidence = Evidence(log_name=name)
        self.operations: list[OperationVerdict] = []
        self.run_findings: list[Finding] = []  # the audit's run-wide ones (its summary's)

    def verdict(self) -> Verdict:
        """The verdict the audit wrote, whole (what ``check(load_log(path), offline=True)`` finds: the parity
        tests hold the two to each other)."""
        return run_verdict(self.operations, self.run_findings, offline=True)
