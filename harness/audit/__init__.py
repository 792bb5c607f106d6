"""Offline audit of a log file, or of a day of them: ``python -m harness audit FILE|GLOB [--format json|text]
[--engine typed|duckdb|spark|stream]``.

Reads our audit events (``event``: operation, attempt, observation, resolution, approval) or the second
article's effect-ledger NDJSON (``type``: attempt | effect, with ``operationId``, ``attemptId``,
``idempotencyKey``, ``payloadHash``, ``result``, ``effectRef``, ``observedAt``); both may be mixed. There is
no wire and no ledger here, so the rules that need them are skipped and effects are counted from the log.
A glob is audited as one log: its files in name order, their lines numbered through.

Engines: ``typed`` (the default, ``harness.audit.typed``) decodes each line once, by msgspec, into the typed
record of its event, in one process a core each reading a part of the log, writes the verdicts of the operations
that tell a clean story without the rules, and shares the rest between the processes (an operation tied to
another is judged by the first, beside it). ``duckdb`` (``harness.audit.engines``) reads the file in SQL and
writes the verdicts of the operations no rule can fire on from SQL (``harness.audit.triage``); the rules judge
the rest. ``spark`` does the same on a Spark session (``--master URL``; docs/spark.md), with the same output.
``stream`` reads line by line in this process alone, memory growing with open operations, not with the
file: an operation is judged once it is resolved (the article's: an effect of it logged) and ``window`` more
operations have been after it (reconciliation may append a second resolution), or at the end of the file.
A file the embedded engine cannot read exactly as Python does (a carriage return, a byte-order mark, bytes
that are not UTF-8) is streamed. Exit status: 0 every operation healthy and no finding, 1 otherwise, 2 when the
file cannot be read or holds no usable line.

The package, one concern a module: ``article.py`` (the article's lines as events), ``lines.py`` (one
line as the audit reads it; ``load_log``, a bare log's ``Evidence``), ``stream.py`` (``StreamingAudit``:
lines in, operations judged), ``fast_path.py`` (clean operations without the rule loop), ``triage.py``
(the SQL), ``engines.py`` (the SQL engines and what drives them), ``typed.py`` (the typed engine),
``output.py`` (JSON and text out). The rules are the checker's: ``check(load_log(path), offline=True)`` finds
what the audit finds (tests/audit/test_parity.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TextIO

from harness.audit.article import article_record
from harness.audit.engines import ENGINES, AuditEngine, EngineUnsuitable, audit_with, open_engine
from harness.audit.fast_path import clean_summary
from harness.audit.files import expand
from harness.audit.lines import load_log
from harness.audit.output import KeptVerdicts, write_summary
from harness.audit.stream import AuditProgress, StreamingAudit, audit_alone
from harness.errors import EvidenceError
from harness.ndjson import open_text
from harness.results.audit import AuditSummary

__all__ = ["ENGINES", "AuditSummary", "KeptVerdicts", "StreamingAudit", "article_record", "audit_file", "clean_summary",
           "load_log"]
FORMATS = ("json", "text")


def _open(path: str) -> TextIO:
    try:
        return open_text(path)
    except OSError as exc:
        raise EvidenceError(f"cannot read {path}: {exc.strerror or exc}") from None


def audit_file(path: str | Path, *, format: str = "text", out: TextIO = sys.stdout, window: int = 10_000,
               engine: str | AuditEngine = "typed", master: str | None = None,
               progress: AuditProgress | None = None, keep: KeptVerdicts | None = None,
               workers: int | None = None) -> AuditSummary:
    """Audit a file (or a glob of them, as one log), writing each judged operation to ``out`` (JSON or text),
    then the run-wide findings and the summary; returns the summary. Raises ``EvidenceError`` when a file
    cannot be read at all; a file with no usable line is an ``AuditSummary`` whose outcome says so.

    ``engine``: ``typed`` (the default: ``harness.audit.typed``, ``workers`` processes reading the log, by
    default one a core for a large log), ``duckdb`` (embedded SQL), ``spark`` (``master``: a Spark master URL,
    default ``local[2]``) or ``stream``; or an open engine (``harness.audit.engines``), which the caller closes.
    The verdicts are the same; ``stream`` lists operations as they are judged, ``duckdb`` and ``spark`` in the
    order of their first line, ``typed`` the healthy ones first. ``progress(bytes read, unhealthy operations so
    far)`` is called as the file is read.

    ``keep``: every operation's verdict and every line read go there too (``audit --html`` builds its page from
    them). It holds the whole log in this process, so the log is streamed here whatever the local engine (the
    embedded engine's triage writes healthy operations from SQL, without a verdict to keep); Spark is refused.
    """
    if format not in FORMATS:
        raise ValueError(f"format {format!r} is not known; valid: {', '.join(FORMATS)}")
    given = None if isinstance(engine, str) else engine
    name_of_engine = engine if isinstance(engine, str) else engine.name
    if name_of_engine not in ENGINES:
        raise ValueError(f"engine {name_of_engine!r} is not known; valid: {', '.join(ENGINES)}")
    if keep is not None and name_of_engine == "spark":
        raise ValueError("engine spark keeps its operations on the cluster: the HTML report is made by "
                         "engine stream or duckdb (which stream the log in this process for it)")
    local = name_of_engine != "spark" or "://" not in str(path)
    paths = expand(path) if local else [str(path)]
    name = str(path)
    size = sum(os.path.getsize(p) for p in paths) if local else 0
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
    files = [(p, 0) for p in paths]
    if name_of_engine == "typed" and given is None and keep is None:
        from harness.audit.typed import audit_typed  # msgspec: imported by the engine that needs it

        try:
            stats, run_findings, files = audit_typed(paths, name, format, window, write, progress, size, workers)
            result = stats, run_findings
        except EngineUnsuitable:
            pass
    elif name_of_engine != "stream" and keep is None:
        try:
            chosen = given or open_engine(name_of_engine, master=master)
        except ImportError as exc:
            raise EvidenceError(f"engine {name_of_engine} needs {exc.name or 'a package that is not installed'}: "
                                f"pip install 'retry-harness[{name_of_engine}]'") from None
        try:
            stats, run_findings, files = audit_with(chosen, paths, name, format, window, write, progress, size)
            result = stats, run_findings
        except EngineUnsuitable:
            if name_of_engine != "duckdb":
                raise
        finally:
            if given is None:
                chosen.close()
    if result is None:  # the stream engine, or a file the embedded engine cannot read as Python does
        counts: list[int] = []
        result = audit_alone((_open(p) for p in paths), name, format, window, write, progress, counts, keep)
        files = list(zip(paths, counts, strict=True))
    stats, run_findings = result
    summary = AuditSummary.from_stats(name, stats, run_findings)
    if keep is not None:
        keep.run_findings = run_findings
    if len(files) > 1:
        summary.files = files
    write_summary(summary, format, out)
    return summary
