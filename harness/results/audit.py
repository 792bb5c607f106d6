"""An offline audit's outcome as data: the counts, the run-wide findings, healthy or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results.verdict import Finding


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
