"""The streaming audit: lines in, each operation judged once its story is told, run-wide findings kept.

Memory grows with open operations, not with the file: an operation is judged once it is resolved
and ``window`` more operations have been resolved after it (reconciliation may append a second
resolution), or at the end of the file.
"""

from __future__ import annotations

import gc
from collections import OrderedDict, defaultdict
from typing import Any, TextIO

import orjson

from harness.audit.article import _article_line
from harness.audit.fast_path import clean_summary
from harness.audit.output import _json_text, _op_json
from harness.checker import Finding, OperationContext, judge_operation
from harness.checker.rules import secret_hits
from harness.events import _vouch, parse_line_pydantic
from harness.report import render_operation

# Cheap pre-filter before the secret patterns: plain substring tests are ~10x faster than one
# case-insensitive regex scan of every line, and catch the spellings the patterns look for.
_SECRET_HINTS = ("earer", "EARER", "uthori", "UTHORI", "PRIVATE KEY", "ookie", "OOKIE")


def _may_hold_secret(text: str) -> bool:
    for hint in _SECRET_HINTS:
        if hint in text:
            return True
    return False


def _blocks(handle: TextIO, *, scan: bool = True) -> Any:
    """The file's lines about a megabyte at a time, each block with whether any line of it may hold a
    secret: one hint scan of the block instead of one per line (a hint cannot span two lines: it
    holds no line break), a line checked on its own only in a block that has one. ``scan=False`` (a
    shard worker, which audits only some of the lines): every line is checked on its own."""
    while True:
        lines = handle.readlines(1 << 20)
        if not lines:
            return
        yield lines, (_may_hold_secret("".join(lines)) if scan else True)


class _KnownOperations:
    """``op_id in known``: open or already judged (for supersedes / correction references)."""

    def __init__(self, open_ops: dict[str, Any], closed: set[str]) -> None:
        self.open_ops, self.closed = open_ops, closed

    def __contains__(self, op_id: object) -> bool:
        return op_id in self.open_ops or op_id in self.closed


class ShardBail(Exception):
    """Raised inside a shard worker when the log holds something one shard cannot judge alone."""


class StreamingAudit:
    """Feeds lines in, calls ``sink(op, piece)`` for each judged operation with its output (JSON text, or
    the text report, "" for a healthy operation in text); run-wide findings are kept.

    ``sharded=True`` (a worker of ``_audit_sharded``, fed only its share of the operations) raises
    ``ShardBail`` on anything whose verdict could depend on operations of another shard or on when the
    operation was judged: a line after an operation's resolution, a superseded, delegated or
    corrected operation, an empty operation id.
    """

    def __init__(self, name: str, sink: Any, *, format: str = "json", window: int = 10_000,
                 sharded: bool = False) -> None:
        self.name = name
        self.sink = sink
        self.format = format
        self.sharded = sharded
        self.expected_operation: str | int | None = None  # sharded: the id the worker read from the text
        self.window = window
        self.open: dict[str, OperationContext] = {}
        self.resolved: OrderedDict[str, None] = OrderedDict()
        self.closed: set[str] = set()
        self.pending: dict[str, list[Finding]] = defaultdict(list)
        # open operations with a line the fast path did not vouch for (pydantic coerced it, or it is in the
        # article's format): only those may hold a float or a huge integer, which orjson writes otherwise
        self.careful_ops: set[str] = set()
        self.intent_ops: dict[str, list[str]] = {}
        self.key_owner: dict[tuple[Any, str], str] = {}
        self.run_findings: list[Finding] = []
        self.known = _KnownOperations(self.open, self.closed)
        self.events = 0
        self.malformed = 0
        self.classes: dict[str, int] = defaultdict(int)
        self.unhealthy = 0
        self.finding_count = 0

    def _finding(self, code: str, rule: str, op_id: str | None, message: str, line: int) -> None:
        finding = Finding(code, rule, op_id, message, [{"source": "log", "file": self.name, "line": line}])
        if op_id is not None and op_id in self.open:
            self.pending[op_id].append(finding)
        else:
            self.run_findings.append(finding)

    def feed(self, line: int, text: str, secrets_possible: bool = True) -> None:
        """One line (without its line break); ``secrets_possible=False`` when no secret hint is in it."""
        try:  # parse_line, inlined: this runs for every line
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            record = None
        careful = record.__class__ is not dict or not _vouch(record)
        error = None
        fmt = "events"
        if careful:  # what the fast path could not vouch for: pydantic, or the article's format
            record, error = parse_line_pydantic(text)
            article = _article_line(text, line) if record is None else None
            if article is not None:
                (record, error), fmt = article, "ledger"
        if error is not None:
            self.malformed += 1
            self._finding("H000", "log-well-formed", None, f"{self.name}:{line}: {error}", line)
            return
        self.events += 1
        if secrets_possible and _may_hold_secret(text):
            hits = secret_hits(text, {})
            if hits:
                self._finding("H019", "no-secret-in-log", record["operation_id"],
                              f"{self.name}:{line} holds {', '.join(hits)}; log a reference and a fingerprint instead", line)
        record["_line"] = line
        op_id = record["operation_id"]
        op = self.open.get(op_id)
        if self.sharded:
            self._stays_in_shard(op, op_id, record)
        if op is None:
            if op_id in self.closed:
                self._finding("H000", "log-well-formed", op_id,
                              f"{self.name}:{line}: {record['event']} for {op_id} comes after that operation was "
                              f"resolved and {self.window} more were; it was judged without this line", line)
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
        if kind == "operation":
            self._operation_declared(op, record, line)
        elif kind == "attempt" and record.get("idempotency_key"):
            owner_key = (op.destination, record["idempotency_key"])
            owner = self.key_owner.setdefault(owner_key, op_id)
            if owner != op_id:
                self._finding("H022", "idempotency-key-not-shared", op_id,
                              f"idempotency key {record['idempotency_key']} of {record['attempt_id']} ({op_id}) was "
                              f"already used by operation {owner}", line)
        elif kind == "resolution":
            self.resolved.pop(op_id, None)
            self.resolved[op_id] = None
            if len(self.resolved) > self.window:
                oldest, _ = self.resolved.popitem(last=False)
                self._judge(oldest)

    def _stays_in_shard(self, op: OperationContext | None, op_id: str, record: dict[str, Any]) -> None:
        if op_id != self.expected_operation:  # the id read from the text was a nested one
            raise ShardBail(f"line {record['_line']} belongs to {op_id}, not {self.expected_operation}")
        if (op is not None and op.resolutions) or op_id in self.closed:
            raise ShardBail(f"line {record['_line']} comes after {op_id} was resolved")
        if not op_id or record.get("supersedes_operation_id") or record.get("parent_operation_id") \
                or record.get("correction_operation_id"):
            raise ShardBail(f"line {record['_line']} refers to another operation")

    def _operation_declared(self, op: OperationContext, record: dict[str, Any], line: int) -> None:
        intent_id = record.get("intent_id")
        if not intent_id or len(op.operations) > 1:
            return
        earlier = self.intent_ops.setdefault(intent_id, [])
        if earlier and record.get("supersedes_operation_id") not in earlier:
            self._finding("H001", "operation-id-stable", op.operation_id,
                          f"intent {intent_id} got a second operation id {op.operation_id} after "
                          f"{', '.join(earlier)} without supersedes_operation_id", line)
        earlier.append(op.operation_id)

    def _judge(self, op_id: str) -> None:
        op = self.open.pop(op_id)
        self.closed.add(op_id)
        careful = op_id in self.careful_ops
        self.careful_ops.discard(op_id)
        extra = self.pending.pop(op_id, [])
        if op.format == "events":
            if op.operation is None:
                first = op.ordered_events()[0]
                extra.append(Finding("H001", "operation-id-stable", op_id,
                                     f"{first['event']} logged under operation {op_id}, which was never declared by "
                                     f"an operation event", [{"source": "log", "file": self.name, "line": first['_line']}]))
            if op.resolution is None:
                extra.append(Finding("H021", "intent-covered", op_id, f"{op_id} was never resolved: it is still open",
                                     [{"source": "log", "file": self.name, "line": op.ordered_events()[-1]["_line"]}]))
        if not extra:
            summary = clean_summary(op)
            if summary is not None:
                self.classes["healthy"] += 1
                self.sink(op, _json_text(summary, careful=careful) if self.format == "json" else "")
                return
        verdict = judge_operation(op, extra, held=False)
        self.classes[verdict.classification] += 1
        self.finding_count += len(verdict.findings)
        problem = verdict.classification != "healthy" or bool(verdict.findings)
        self.unhealthy += problem
        if self.format == "json":
            self.sink(op, _json_text(_op_json(verdict), careful=careful))
        else:
            self.sink(op, "\n".join(render_operation(verdict, offline=True)) + "\n\n" if problem else "")

    def finish(self) -> None:
        for op_id in list(self.open):
            self._judge(op_id)
        self.finding_count += len(self.run_findings)



def _audit_alone(handle: TextIO, name: str, format: str, window: int,
                 write: Any) -> tuple[dict[str, Any], list[Finding]]:
    """One process, one pass: ``write(piece)`` for each operation's output in order; returns (stats, run
    findings)."""
    audit = StreamingAudit(name, lambda op, piece: write(piece) if piece else None, format=format, window=window)
    # The cyclic GC rescans the whole live heap (the window of resolved operations, the id sets) ever
    # more often on a long log; nothing the audit allocates outlives its operation through a cycle,
    # so reference counting frees it all and the collector is paused for the run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with handle:
            feed = audit.feed
            number = 0
            for lines, secrets_possible in _blocks(handle):
                for text in lines:
                    number += 1
                    if text[0] == "{" or text.strip():
                        feed(number, text.rstrip("\r\n"), secrets_possible)  # parse errors point into the line
            audit.finish()
    finally:
        if collecting:
            gc.enable()
    return _stats(audit), audit.run_findings


def _stats(audit: StreamingAudit) -> dict[str, Any]:
    return {"events": audit.events, "malformed": audit.malformed, "classes": dict(audit.classes),
            "unhealthy": audit.unhealthy, "findings": audit.finding_count}

