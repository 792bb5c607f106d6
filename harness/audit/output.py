"""What the audit returns and writes: one operation's JSON verdict, and the summary at the end."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson
from pydantic_core import to_json

from harness.checker import Finding, OperationVerdict
from harness.report import render_audit_summary


@dataclass
class AuditSummary:
    """What an audit found, as data: counts, the run-wide findings, and its outcome."""

    file: str
    events: int
    malformed_lines: int
    classifications: dict[str, int]
    findings: int  # every finding, the operations' and the run-wide ones
    unhealthy: int  # operations not healthy or with a finding
    run_findings: list[Finding] = field(default_factory=list)
    files: list[tuple[str, int]] = field(default_factory=list)  # a glob's files and their lines, in order

    @classmethod
    def from_stats(cls, name: str, stats: dict[str, Any], run_findings: list[Finding]) -> AuditSummary:
        return cls(name, stats["events"], stats["malformed"], dict(sorted(stats["classes"].items())),
                   stats["findings"], stats["unhealthy"], run_findings)

    @property
    def operations(self) -> int:
        return sum(self.classifications.values())

    @property
    def outcome(self) -> str:
        """``healthy`` (every operation, no finding), ``unhealthy``, or ``unusable`` (no usable line)."""
        if self.events == 0:
            return "unusable"
        return "unhealthy" if self.unhealthy or self.run_findings else "healthy"

    def to_dict(self) -> dict[str, Any]:
        data = {"events": self.events, "malformed_lines": self.malformed_lines, "operations": self.operations,
                "classifications": self.classifications, "findings": self.findings, "outcome": self.outcome}
        if self.files:
            data["files"] = [{"file": name, "lines": lines} for name, lines in self.files]
        return data


def write_summary(summary: AuditSummary, format: str, out: TextIO) -> None:
    """The end of the audit's output: run-wide findings and the counts (closing the JSON document)."""
    if format == "json":
        out.write("\n  ],\n  \"findings\": " + json.dumps([f.to_dict() for f in summary.run_findings]) +
                  ",\n  \"summary\": " + json.dumps(summary.to_dict()) + "\n}\n")
    else:
        out.write(render_audit_summary(summary))


def _json_text(data: dict[str, Any], *, careful: bool = False) -> str:
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


def _op_json(verdict: OperationVerdict) -> dict[str, Any]:
    data = verdict.to_dict()
    for key in NOT_AUDITED:
        data.pop(key, None)
    return data
