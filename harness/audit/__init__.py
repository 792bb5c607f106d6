"""Offline audit of one log file, streaming: ``python -m harness audit FILE [--format json|text]``.

Reads, line by line, either our audit events (``event``: operation, attempt, observation,
resolution, approval) or the second article's effect-ledger NDJSON (``type``: attempt | effect, with
``operationId``, ``attemptId``, ``idempotencyKey``, ``payloadHash``, ``result``, ``effectRef``,
``observedAt``); both may be mixed. There is no wire and no ledger here, so the rules that need them
are skipped and effects are counted from the log.

Memory grows with open operations, not with the file: an operation is judged once it is resolved
and ``window`` more operations have been resolved after it (reconciliation may append a second
resolution), or at the end of the file. Exit status: 0 every operation healthy and no finding,
1 otherwise, 2 when the file cannot be read or holds no usable line.

Speed (docs/checker.md, "Offline audit"): lines are parsed by orjson and vouched for field by field
before pydantic sees them, clean operations skip the rule loop, and a large file is split across
worker processes by operation id; each of these gives exactly what the plain path gives.

The package, one concern a module: ``article.py`` (the article's lines as events), ``lines.py`` (one
line as the audit reads it; ``load_log``, a bare log's ``Evidence``), ``stream.py`` (``StreamingAudit``:
lines in, operations judged), ``fast_path.py`` (clean operations without the rule loop), ``shards.py``
(the file split across processes), ``output.py`` (JSON and text out). The rules are the checker's:
``check(load_log(path), offline=True)`` finds what the audit finds (tests/audit/test_parity.py).
"""

from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path
from typing import TextIO

from harness.audit.article import article_record
from harness.audit.fast_path import clean_summary
from harness.audit.lines import load_log
from harness.audit.output import AuditSummary, write_summary
from harness.audit.shards import SHARD_MIN_BYTES, _audit_sharded, _cores
from harness.audit.stream import AuditProgress, StreamingAudit, _audit_alone
from harness.contract import AGENT_LOG_FILE
from harness.errors import EvidenceError
from harness.ndjson import open_text

__all__ = ["SHARD_MIN_BYTES", "AuditSummary", "StreamingAudit", "article_record", "audit_file", "clean_summary",
           "load_log"]
FORMATS = ("json", "text")


def _open(path: Path) -> TextIO:
    try:
        return open_text(path)
    except OSError as exc:
        raise EvidenceError(f"cannot read {path}: {exc.strerror or exc}") from None


def audit_file(path: Path, *, format: str = "text", out: TextIO = sys.stdout, window: int = 10_000,
               workers: int | None = None, progress: AuditProgress | None = None) -> AuditSummary:
    """Audit one file, writing each judged operation to ``out`` as it goes (JSON or text), then the
    run-wide findings and the summary; returns the summary. Raises ``EvidenceError`` when the file
    cannot be read at all; a file with no usable line is an ``AuditSummary`` whose outcome says so.

    ``workers``: processes sharing the operations (None: one per core, up to 4, for files of at least
    ``SHARD_MIN_BYTES``; 1: this process alone). The output is the same either way. ``progress(bytes read,
    unhealthy operations so far)`` is called as the file is read (once a megabyte or a few times a second).
    """
    if format not in FORMATS:
        raise ValueError(f"format {format!r} is not known; valid: {', '.join(FORMATS)}")
    path = Path(path)
    if path.is_dir():
        raise EvidenceError(f"{path} is a folder; give the audit log file (e.g. {path / AGENT_LOG_FILE})")
    handle = _open(path)
    name = str(path)
    if workers is None:
        try:
            big = path.stat().st_size >= SHARD_MIN_BYTES
        except OSError:
            big = False
        workers = min(4, _cores()) if big else 1
    first = [True]

    def write(piece: str) -> None:
        if format == "json":
            out.write(("\n    " if first[0] else ",\n    ") + piece)
            first[0] = False
        else:
            out.write(piece)

    if format == "json":
        out.write('{"file": ' + json.dumps(name) + ',\n  "operations": [')
    result = None
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        handle.close()
        result = _audit_sharded(path, name, format, window, workers, write, progress)
        if result is None:  # something only one process can judge: start again alone
            handle = _open(path)
    if result is None:
        result = _audit_alone(handle, name, format, window, write, progress)
    stats, run_findings = result
    summary = AuditSummary.from_stats(name, stats, run_findings)
    write_summary(summary, format, out)
    return summary
