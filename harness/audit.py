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
"""

from __future__ import annotations

import gc
import heapq
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
from array import array
from collections import OrderedDict, defaultdict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TextIO

import orjson
from pydantic_core import from_json, to_json

from harness.checker import Finding, OperationContext, OperationVerdict, judge_operation
from harness.checker import _observation_view, _resolution_view
from harness.checker.context import SAFE_METHODS
from harness.checker.rules import secret_hits
from harness.contract import AGENT_LOG_FILE
from harness.events import RETRY_REASONS, _vouch, parse_line, parse_line_pydantic
from harness.report import render_operation, _finding_lines

# Transport results of the article's format, mapped to dispatch states.
_NOT_SENT = frozenset({"not_sent", "refused", "connection_refused", "blocked"})
_UNKNOWN = frozenset({"timeout", "timed_out", "no_response", "lost", "unknown", "ambiguous", "sent_no_response"})
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


def article_record(raw: dict[str, Any], line: int) -> tuple[dict[str, Any] | None, str | None]:
    """One line of the article's effect ledger as an event the rules understand (or an error)."""
    kind = raw.get("type")
    op = raw.get("operationId")
    if not isinstance(op, str) or not op:
        return None, f"{kind} line has no string operationId"
    if kind == "attempt":
        attempt_id = raw.get("attemptId")
        if not isinstance(attempt_id, str) or not attempt_id:
            return None, "attempt line has no string attemptId"
        for name in ("idempotencyKey", "payloadHash", "result"):
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                return None, f"attempt line: {name} must be a string or null, got {json.dumps(value)}"
        result = str(raw.get("result") or "").lower()
        state = "not_sent" if result in _NOT_SENT else "sent_no_response" if result in _UNKNOWN else "response_received"
        return {"event": "attempt", "operation_id": op, "attempt_id": attempt_id, "dispatch_state": state,
                "idempotency_key": raw.get("idempotencyKey"), "request_fingerprint": raw.get("payloadHash"),
                "result": raw.get("result"), "ts": raw.get("observedAt"), "_line": line}, None
    ref = raw.get("effectRef")
    if not isinstance(ref, str) or not ref:
        return None, "effect line has no string effectRef"
    return {"event": "effect", "operation_id": op, "effect_ref": ref, "ts": raw.get("observedAt"), "_line": line}, None


def _article_line(text: str, line: int) -> tuple[dict[str, Any] | None, str | None] | None:
    """`article_record` of a line in the article's format (`type: attempt|effect`), or None when the
    line is not in that format at all."""
    if '"type"' not in text:
        return None
    try:
        raw = from_json(text)
    except ValueError:
        return None
    if type(raw) is dict and "event" not in raw and raw.get("type") in ("attempt", "effect"):
        return article_record(raw, line)
    return None


def _attempt_json(attempt: dict[str, Any]) -> dict[str, Any]:
    """``AttemptVerdict.to_dict()`` of an offline attempt (no wire, no ledger rows)."""
    return {"attempt_id": attempt["attempt_id"], "dispatch_state": attempt.get("dispatch_state"),
            "key": attempt.get("idempotency_key"), "line": attempt.get("_line"),
            "retry_of_attempt_id": attempt.get("retry_of_attempt_id"), "retry_reason": attempt.get("retry_reason"),
            "wire": None, "destination_saw": []}


def clean_summary(op: OperationContext) -> dict[str, Any] | None:
    """The JSON verdict of a common clean story without running every rule, or None when it is not one.

    The stories: one operation event (nothing superseded or delegated), no approval, one or two
    attempts with one idempotency key (or none) that does not contain an attempt id, and one
    ``succeeded`` resolution citing only ids the operation holds and naming its one distinct effect.
    A second attempt must be a linked, budgeted retry of the first with the same payload, and when
    the first lost its response the shared key is what justifies it; at most one observation (a
    lookup that reconciled a lost response). No rule can fire on these, and the dict equals
    ``judge_operation``'s (a property test holds both against the full rules), so a production log
    of mostly clean operations audits fast.
    """
    attempts = op.attempts
    if (op.format != "events" or len(op.operations) != 1 or len(op.resolutions) != 1 or op.approvals
            or op.log_effects or not attempts or len(attempts) > 2 or len(op.observations) > 1):
        return None
    declared, resolution, first = op.operations[0], op.resolutions[0], attempts[0]
    if (resolution.get("state") != "succeeded" or declared.get("supersedes_operation_id")
            or declared.get("parent_operation_id") or first.get("retry_of_attempt_id") or first.get("retry_reason")):
        return None
    key = first.get("idempotency_key")
    for attempt in attempts:
        method = attempt.get("method")
        if (attempt.get("idempotency_key") != key or (attempt.get("attempt_budget_remaining") or 0) < 0
                or (method and method.upper() in SAFE_METHODS)
                or (key and attempt["attempt_id"] in key)):
            return None
    if key and key != (declared.get("idempotency_key") or key):
        return None
    if len(attempts) == 2:
        second = attempts[1]
        prior = second.get("prior_request_fingerprint")
        if (second.get("retry_of_attempt_id") != first["attempt_id"] or second.get("retry_reason") not in RETRY_REASONS
                or second.get("attempt_budget_remaining") is None or first.get("attempt_budget_remaining") == 0
                or first.get("http_status") == 429
                or second.get("request_fingerprint") != first.get("request_fingerprint")
                or (prior and prior != first.get("request_fingerprint"))
                or (not key and first.get("dispatch_state") == "sent_no_response")):
            return None
    refs = op.effect_refs()
    named = resolution.get("effect_refs")
    cited = resolution.get("evidence")
    if len(refs) != 1 or not named or not cited:
        return None
    only = refs[0]
    for ref in named:
        if ref != only:
            return None
    attempt_ids = op._attempt_index  # op.evidence_ids without building a set (there is no approval)
    observation_ids = [o["observation_id"] for o in op.observations]
    for evidence_id in cited:
        if evidence_id not in attempt_ids and evidence_id not in observation_ids:
            return None
    return {"operation_id": op.operation_id, "intent_id": declared.get("intent_id"), "intent": declared.get("intent"),
            "classification": "healthy", "state": "succeeded", "attempts": [_attempt_json(a) for a in attempts],
            "effects": list(refs), "findings": [], "observations": [_observation_view(o) for o in op.observations],
            "resolution": _resolution_view(resolution)}


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


def _open(path: Path, err: TextIO) -> TextIO | None:
    try:
        return path.open("r", encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"audit: cannot read {path}: {exc.strerror or exc}", file=err)
        return None


# Below this size one process audits the file: forking workers costs more than it saves.
SHARD_MIN_BYTES = 16_000_000
# How a worker reads a line's operation id without parsing it (compact and spaced JSON)
_OPERATION_ID_KEYS = ('"operation_id":"', '"operation_id": "')


def run_audit(path: Path, *, format: str = "text", out: TextIO = sys.stdout, err: TextIO = sys.stderr,
              window: int = 10_000, workers: int | None = None) -> int:
    """Audit one file; see the module docstring for the exit status.

    ``workers``: processes sharing the operations (None: one per core, up to 4, for files of at least
    ``SHARD_MIN_BYTES``; 1: this process alone). The output is the same either way.
    """
    if format not in ("text", "json"):
        print(f"audit: --format {format!r} is not known; valid: json, text", file=err)
        return 2
    path = Path(path)
    if path.is_dir():
        print(f"audit: {path} is a folder; give the audit log file (e.g. {path / AGENT_LOG_FILE})", file=err)
        return 2
    handle = _open(path, err)
    if handle is None:
        return 2
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
        result = _audit_sharded(path, name, format, window, workers, write)
        if result is None:  # something only one process can judge: start again alone
            handle = _open(path, err)
            if handle is None:
                return 2
    if result is None:
        result = _audit_alone(handle, name, format, window, write)
    stats, run_findings = result
    return _finish_output(name, format, stats, run_findings, out, err)


def _cores() -> int:
    """The cores this process may run on (not all the machine's, under an affinity mask or a container)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


def _finish_output(name: str, format: str, stats: dict[str, Any], run_findings: list[Finding], out: TextIO,
                   err: TextIO) -> int:
    classes = stats["classes"]
    usable = stats["events"] > 0
    status = 2 if not usable else (1 if stats["unhealthy"] or run_findings else 0)
    summary = {"events": stats["events"], "malformed_lines": stats["malformed"],
               "operations": sum(classes.values()), "classifications": dict(sorted(classes.items())),
               "findings": stats["findings"], "exit_status": status}
    if format == "json":
        out.write("\n  ],\n  \"findings\": " + json.dumps([f.to_dict() for f in run_findings]) +
                  ",\n  \"summary\": " + json.dumps(summary) + "\n}\n")
    else:
        for finding in run_findings:
            out.write("\n".join(_finding_lines(finding, "")) + "\n")
        counts = ", ".join(f"{n} {c}" for c, n in sorted(classes.items())) or "no operations"
        out.write(f"{name}: {stats['events']} events, {summary['operations']} operations ({counts}); "
                  f"{stats['findings']} finding(s), {stats['malformed']} malformed line(s)\n")
    if not usable:
        print(f"audit: {name} holds no usable audit event "
              f"({stats['malformed']} malformed line(s)); expected NDJSON with 'event' or 'type' per line", file=err)
    return status


# -- sharding: the operations split across processes by operation id, the output merged back in order.
#
# Every worker reads the whole file and audits only the lines of its operations (the id is read
# straight from the text where that is unambiguous, else from the parsed line; a line with no
# operation goes to the worker its line number picks). One process judges an operation once it is
# resolved and ``window`` more were, then the rest at the end of the file in first-seen order; a
# worker cannot see the others' resolutions, so it tags each output with the line of the operation's
# resolution and of its first line, and the parent restores that order. The verdicts cannot differ
# from one process's as long as no operation's verdict depends on another operation or on when it was
# judged; a worker bails out (ShardBail) where one might, and the parent checks that no intent id or
# idempotency key is shared across workers; on any doubt the file is audited again by one process.

def _owner(text: str, number: int) -> str | int:
    """The operation id of a line as parsing gives it, or its line number when it has none."""
    record, _ = parse_line(text)
    if record is not None:
        return record["operation_id"]
    article = _article_line(text, number)
    if article is not None and article[0] is not None:
        return article[0]["operation_id"]
    return number


def _shard_worker(path: str, name: str, format: str, window: int, shard: int, shards: int,
                  folder: str) -> dict[str, Any]:
    """Audit one shard; outputs go to two files sorted for the merge (see ``_merge_pieces``)."""
    gc.disable()  # see _audit_alone
    resolved_file = open(os.path.join(folder, f"{shard}.resolved"), "w", encoding="utf-8", newline="\n")
    open_file = open(os.path.join(folder, f"{shard}.open"), "w", encoding="utf-8", newline="\n")
    first_line: dict[str, int] = {}
    resolved_count = 0

    def sink(op: OperationContext, piece: str) -> None:
        nonlocal resolved_count
        first = first_line.pop(op.operation_id)
        text = piece if format == "json" else json.dumps(piece)  # one line per output
        if op.resolutions:
            resolved_file.write(f"{op.resolutions[-1]['_line']}\t{first}\t{text}\n")
            resolved_count += 1
        else:  # only finish() judges these, in first-seen order: already sorted
            open_file.write(f"{first}\t{text}\n")

    audit = StreamingAudit(name, sink, format=format, window=window, sharded=True)
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle, resolved_file, open_file:
            feed = audit.feed
            number = 0
            for lines, secrets_possible in _blocks(handle, scan=False):
                for text in lines:
                    number += 1
                    if text[0] != "{" and not text.strip():
                        continue
                    owner: str | int | None = None
                    for key in _OPERATION_ID_KEYS:
                        start = text.find(key)
                        if start >= 0:
                            start += len(key)
                            owner = text[start:text.find('"', start)]
                            break
                    if owner is None or "\\" in owner:
                        owner = _owner(text, number)
                    if hash(owner) % shards != shard:  # the same hash in every forked worker
                        continue
                    audit.expected_operation = owner
                    feed(number, text.rstrip("\r\n"), secrets_possible)
                    if type(owner) is str and owner not in first_line and owner in audit.open:
                        first_line[owner] = number  # the line that opened it (a malformed one does not)
            # the end of the file: resolved operations in resolution order, then the rest
            for op_id in list(audit.resolved):
                audit.resolved.pop(op_id)
                audit._judge(op_id)
            audit.finish()
    except ShardBail as bail:
        return {"bail": str(bail)}
    return {"stats": _stats(audit), "run_findings": audit.run_findings, "resolved": resolved_count,
            "intents": _hashes(audit.intent_ops), "keys": _hashes(audit.key_owner)}


def _hashes(values: Any) -> array:
    """The values' hashes, 8 bytes each, for the parent's overlap check: two workers' hash arrays that
    share no number share no value, and a shared number (a collision, about 1 in 10^9 here) only costs
    a second audit by one process. A set of the values themselves took a hundred MB in the parent."""
    return array("q", sorted(hash(v) for v in values))


def _audit_sharded(path: Path, name: str, format: str, window: int, workers: int,
                   write: Any = None) -> tuple[dict[str, Any], list[Finding]] | None:
    """Audit with ``workers`` processes, ``write(piece)`` for each operation's output in one process's order;
    None when one process must do it (see the notes above): then nothing was written."""
    folder = tempfile.mkdtemp(prefix="audit-shards-")
    try:
        before = _file_version(path)
        context = multiprocessing.get_context("fork")
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                futures = [pool.submit(_shard_worker, str(path), name, format, window, shard, workers, folder)
                           for shard in range(workers)]
                results = [f.result() for f in futures]
        except BrokenProcessPool:  # a worker died (out of memory, killed): one process tries alone
            return None
        # a log still being written: the workers may have read different lengths of it
        if any("bail" in r for r in results) or _file_version(path) != before:
            return None
        for kind in ("intents", "keys"):
            seen: set[int] = set()
            for r in results:
                if not seen.isdisjoint(r[kind]):
                    return None  # H001 / H022 across workers: one process judges those
                seen.update(r[kind])
            del seen
        stats: dict[str, Any] = {"events": 0, "malformed": 0, "classes": defaultdict(int), "unhealthy": 0,
                                 "findings": 0}
        for r in results:
            for key in ("events", "malformed", "unhealthy", "findings"):
                stats[key] += r["stats"][key]
            for cls, n in r["stats"]["classes"].items():
                stats["classes"][cls] += n
        # run-wide findings in line order, as one process appends them (a line's all come from one worker)
        run_findings = sorted((f for r in results for f in r["run_findings"]), key=lambda f: f.evidence[0]["line"])
        for piece in _merge_pieces(folder, workers, sum(r["resolved"] for r in results), window, format):
            if write is not None:
                write(piece)
        return stats, run_findings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _file_version(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _merge_pieces(folder: str, workers: int, resolved: int, window: int, format: str) -> Any:
    """The workers' outputs in one process's order: first the operations the window judged, by their
    resolution's line (all resolved ones but the last ``window``); then the rest by first line."""
    def read(kind: str, shard: int) -> Any:
        with open(os.path.join(folder, f"{shard}.{kind}"), encoding="utf-8", newline="\n") as handle:
            for row in handle:
                fields = row.rstrip("\n").split("\t", 2 if kind == "resolved" else 1)
                piece = fields[-1] if format == "json" else json.loads(fields[-1])
                yield int(fields[0]), (int(fields[1]) if kind == "resolved" else 0), piece

    early = max(0, resolved - window)
    tail: list[tuple[int, int, str]] = []
    for index, (_, first, piece) in enumerate(heapq.merge(*(read("resolved", s) for s in range(workers)))):
        if index < early:
            if piece:
                yield piece
        else:
            tail.append((first, 0, piece))
    tail.sort()
    for _, _, piece in heapq.merge(tail, *(read("open", s) for s in range(workers))):
        if piece:
            yield piece


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


def _op_json(verdict: OperationVerdict) -> dict[str, Any]:
    data = verdict.to_dict()
    data.pop("held", None)
    return data
