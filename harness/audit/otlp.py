"""The offline audit of an OpenTelemetry trace (``python -m harness audit FILE --format otlp``): the spans read as
events (``harness.otel.reader``) and judged by the audit's rules, the output the audit's own (text or JSON).

The trace's lines are streamed, but its events are judged once all are read: an operation's spans come in
whatever order they ended, across export lines, and the events are put in log order by time first. Its verdict
is ``check(load_trace_log(path), offline=True)``, which is what the streaming audit gives for a log
(tests/audit/test_parity.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TextIO

from harness.audit.output import KeptVerdicts, json_text, operation_json, write_summary
from harness.checker import check
from harness.errors import EvidenceError
from harness.evidence import Evidence, load_trace
from harness.report import render_operation
from harness.results.audit import AuditSummary


def trace_log_name(path: Path) -> str:
    """How findings name the events read from a trace file: ``FILE (read as events):N`` is the n-th."""
    return f"{path} (read as events)"


def load_trace_log(path: str | Path) -> Evidence:
    """A bare trace read as a log: its events, the problems reading it (H000), no journal, ledger or context."""
    path = Path(path)
    if path.is_dir():
        raise EvidenceError(f"{path} is a folder; give the trace file (OTLP JSON lines)")
    evidence = Evidence(log_name=trace_log_name(path))
    load_trace(path, evidence, name=str(path))
    return evidence


def audit_trace(path: Path, *, format: str = "text", out: TextIO, keep: KeptVerdicts | None = None) -> AuditSummary:
    """Audit one trace file, writing what the log audit writes (each unhealthy operation in text, every
    operation in JSON, then the run-wide findings and the summary); ``keep`` gets every operation's verdict and
    the events read (``audit_file``)."""
    evidence = load_trace_log(path)
    verdict = check(evidence, offline=True)
    if keep is not None:
        keep.evidence, keep.operations = evidence, verdict.operations
    name = str(path)
    ops = {op.operation_id for op in verdict.operations}
    problems = [op for op in verdict.operations if op.classification != "healthy" or op.findings]
    if format == "json":
        out.write('{"file": ' + json.dumps(name) + ',\n  "operations": [')
        out.write(",".join("\n    " + json_text(operation_json(op), careful=True) for op in verdict.operations))
    else:
        for op in problems:
            out.write("\n".join(render_operation(op, offline=True)) + "\n\n")
    run_findings = [f for f in verdict.findings if f.operation_id not in ops]
    if keep is not None:
        keep.run_findings = run_findings
    summary = AuditSummary(name, len(evidence.events), len(evidence.log_errors),
                           dict(sorted(Counter(op.classification for op in verdict.operations).items())),
                           len(verdict.findings), len(problems), run_findings)
    write_summary(summary, format, out)
    return summary
