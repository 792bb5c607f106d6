"""The streaming audit: lines in, each operation judged once its story is told, run-wide findings kept.

Memory grows with open operations, not with the file: an operation is judged once it is resolved (in the
article's format, once an effect of it is logged) and ``window`` more operations have been after it
(reconciliation may append a second resolution, a retry a second effect), or at the end of the file.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

import orjson

from harness.audit.article import ARTICLE_TYPES, article_line, article_record
from harness.audit.fast_path import clean_summary
from harness.audit.output import KeptVerdicts, json_text, operation_json
from harness.checker import Finding, OperationContext, RunRules, judge_operation
from harness.events import parse_line_pydantic, vouch_for
from harness.evidence import Evidence
from harness.limits import collector_paused
from harness.ndjson import limit_error
from harness.report import render_operation


def _blocks(handle: TextIO, might_find: Callable[[str], bool]) -> Iterator[tuple[list[str], bool]]:
    """The file's lines about a megabyte at a time, each block with whether the run rules that read a
    line's text (H019) might find anything in it: one ``might_find`` of the block instead of one per
    line, a line read on its own only in a block that might."""
    while True:
        lines = handle.readlines(1 << 20)
        if not lines:
            return
        yield lines, might_find("".join(lines))


class _KnownOperations:
    """``op_id in known``: open or already judged (for supersedes / correction references)."""

    def __init__(self, open_ops: dict[str, Any], closed: set[str]) -> None:
        self.open_ops, self.closed = open_ops, closed

    def __contains__(self, op_id: object) -> bool:
        return op_id in self.open_ops or op_id in self.closed


class StreamingAudit:
    """Feeds lines in, calls ``sink(op, piece)`` for each judged operation with its output (JSON text, or
    the text report, "" for a healthy operation in text); run-wide findings are kept.

    The run rules (``run_rules``, the checker's own: there is no other implementation of them here) hear
    every line as it is read and each operation as the window judges it; what they find about an
    operation still open goes into its verdict, the rest is run-wide.

    The triaged engines (``harness.audit.engines``) feed it only the lines SQL could not judge, in file order.
    ``keep`` gets every operation's verdict (no fast path: each is judged by the rules, with the checks its
    history held) and every line read, for ``audit --html``; the output is the same.
    """

    def __init__(self, name: str, sink: Any, *, format: str = "json", window: int = 10_000,
                 keep: KeptVerdicts | None = None) -> None:
        self.name = name
        self.sink = sink
        self.keep = keep
        self.format = format
        self.window = window
        self.open: dict[str, OperationContext] = {}
        self.resolved: OrderedDict[str, None] = OrderedDict()
        self.closed: set[str] = set()
        self.pending: dict[str, list[Finding]] = defaultdict(list)
        # open operations with a line the fast path did not vouch for (pydantic coerced it, or it is in the
        # article's format): only those may hold a float or a huge integer, which orjson writes otherwise
        self.careful_ops: set[str] = set()
        self.run_findings: list[Finding] = []
        self.run_rules = RunRules(Evidence(log_name=name), self._found, offline=True)  # a bare log: nothing else
        self._record_hooks = self.run_rules.record_hooks
        self._done_hooks = self.run_rules.done_hooks
        line_rules = self.run_rules.line_rules  # RunRules.line; one rule (H019) is called without the loop
        self._read_line = (line_rules[0].line if len(line_rules) == 1 else self.run_rules.line) if line_rules else None
        self.known = _KnownOperations(self.open, self.closed)
        self.events = 0
        self.malformed = 0
        self.classes: dict[str, int] = defaultdict(int)
        self.unhealthy = 0
        self.finding_count = 0

    def _found(self, finding: Finding) -> None:
        op_id = finding.operation_id
        if op_id is not None and op_id in self.open and op_id not in self.closed:  # not judged yet
            self.pending[op_id].append(finding)
        else:
            self.run_findings.append(finding)

    def feed(self, line: int, text: str, read_text: bool = True) -> None:
        """One line (without its line break); ``read_text=False`` when no run rule might find anything in
        its text (``RunRules.might_find``)."""
        try:  # lines.read_line, inlined: this runs for every line
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            record = None
        careful = record.__class__ is not dict or not vouch_for(record)
        error = None
        fmt = "events"
        if careful:  # what the fast path could not vouch for: the article's format, or pydantic
            if (record.__class__ is dict and "event" not in record and record.get("type") in ARTICLE_TYPES
                    and limit_error(text) is None):  # article_line, without parsing the line twice more
                (record, error), fmt = article_record(record, line), "ledger"
            else:
                record, error = parse_line_pydantic(text)
                article = article_line(text, line) if record is None else None
                if article is not None:
                    (record, error), fmt = article, "ledger"
        read_line = self._read_line if read_text else None
        if error is not None:
            self.malformed += 1
            if self.keep is not None:
                self.keep.evidence.log_errors.append({"line": line, "error": error})
            self.run_rules.malformed(line, error)
            if read_line is not None:
                read_line(line, text, None)
            return
        self.events += 1
        record["_line"] = line
        if self.keep is not None:
            self.keep.evidence.events.append(record)
        op_id = record["operation_id"]
        op = self.open.get(op_id)
        if op is None:
            if op_id in self.closed:
                if read_line is not None:
                    read_line(line, text, op_id)
                self.run_rules.late(record, self.window)
                return
            op = self.open[op_id] = OperationContext(op_id, fmt=fmt, offline=True)
            op.peers = self.open
            op.all_operation_ids = self.known
        elif fmt == "events":
            op.format = "events"
        if careful:
            self.careful_ops.add(op_id)
        op.add(record)
        kind = record["event"]
        hooks = self._record_hooks.get(kind)
        if hooks is not None:
            for hook in hooks:
                hook(record, op)
        if read_line is not None:
            read_line(line, text, op_id)
        # the article's ledger has no resolution: its operation's story is told once an effect is logged
        if kind == "resolution" or (kind == "effect" and op.format == "ledger"):
            self.resolved.pop(op_id, None)
            self.resolved[op_id] = None
            if len(self.resolved) > self.window:
                oldest, _ = self.resolved.popitem(last=False)
                self._judge(oldest)

    def _judge(self, op_id: str, *, drop: bool = True) -> None:
        """Judge an open operation; ``drop=False`` leaves it among the open ones (``peers``) for the rest."""
        op = self.open[op_id]
        for hook in self._done_hooks:  # RunRules.operation_done; what they find goes into this verdict
            hook(op)
        if drop:
            del self.open[op_id]
        self.closed.add(op_id)
        careful = op_id in self.careful_ops
        self.careful_ops.discard(op_id)
        extra = self.pending.pop(op_id, [])
        if not extra and self.keep is None:
            summary = clean_summary(op)
            if summary is not None:
                self.classes["healthy"] += 1
                self.sink(op, json_text(summary, careful=careful) if self.format == "json" else "")
                return
        verdict = judge_operation(op, extra, held=self.keep is not None)
        if self.keep is not None:  # the page shows what the history held; the output says what it always says
            self.keep.operations.append(verdict)
            verdict = dataclasses.replace(verdict, held=[], not_exercised=[], transitions=[])  # NOT_AUDITED
        self.classes[verdict.classification] += 1
        self.finding_count += len(verdict.findings)
        problem = verdict.classification != "healthy" or bool(verdict.findings)
        self.unhealthy += problem
        if self.format == "json":
            self.sink(op, json_text(operation_json(verdict), careful=careful))
        else:
            self.sink(op, "\n".join(render_operation(verdict, offline=True)) + "\n\n" if problem else "")

    def finish(self) -> None:
        """The end of the file: every operation still open is judged beside all the others, as ``check()``
        judges them (a worker's parent, ``parent_operation_id``, is still a peer), then the run rules end."""
        for op_id in list(self.open):
            self._judge(op_id, drop=False)
        self.open.clear()
        self.run_rules.finish(None)
        self.finding_count += len(self.run_findings)


def position(handle: TextIO) -> int:
    """About how many bytes of the file were read (the text layer reads ahead a few kB): for progress only."""
    try:
        return int(handle.buffer.tell())
    except (AttributeError, OSError, ValueError):
        return 0


AuditProgress = Callable[[int, int], None]  # (bytes read, unhealthy operations so far)


def audit_alone(handles: Iterable[TextIO], name: str, format: str, window: int,
                write: Any, progress: AuditProgress | None = None,
                counts: list[int] | None = None,
                keep: KeptVerdicts | None = None) -> tuple[dict[str, Any], list[Finding]]:
    """One process, one pass over the files in turn (their lines numbered through): ``write(piece)`` for each
    operation's output in order; returns (stats, run findings). ``progress`` hears, once a block (about a
    megabyte), the bytes read and the unhealthy operations so far; ``counts`` gets each file's line count;
    ``keep`` every verdict and line (``StreamingAudit``)."""
    audit = StreamingAudit(name, lambda op, piece: write(piece) if piece else None, format=format, window=window,
                           keep=keep)
    done = 0  # bytes of the files already read
    with collector_paused():  # the window of resolved operations and the id sets are long-lived
        feed = audit.feed
        number = 0
        for handle in handles:
            before = number
            with handle:  # closed as soon as it is read
                for lines, read_text in _blocks(handle, audit.run_rules.might_find):
                    for text in lines:
                        number += 1
                        if text[0] == "{" or text.strip():
                            feed(number, text.rstrip("\r\n"), read_text)  # parse errors point into the line
                    if progress is not None:
                        progress(done + position(handle), audit.unhealthy)
                done += position(handle)  # still open here
            if counts is not None:
                counts.append(number - before)
        audit.finish()
        if progress is not None:  # operations still open at the end are judged only now
            progress(done, audit.unhealthy)
    return stats_of(audit), audit.run_findings


def stats_of(audit: StreamingAudit) -> dict[str, Any]:
    return {"events": audit.events, "malformed": audit.malformed, "classes": dict(audit.classes),
            "unhealthy": audit.unhealthy, "findings": audit.finding_count}

