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
"""

from __future__ import annotations

import gc
import json
import sys
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import from_json, to_json

from harness.checker import Finding, OperationContext, OperationVerdict, judge_operation
from harness.checker import _observation_view, _resolution_view
from harness.checker.context import SAFE_METHODS
from harness.checker.rules import secret_hits
from harness.events import RETRY_REASONS, parse_line
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
        result = str(raw.get("result") or "").lower()
        state = "not_sent" if result in _NOT_SENT else "sent_no_response" if result in _UNKNOWN else "response_received"
        return {"event": "attempt", "operation_id": op, "attempt_id": attempt_id, "dispatch_state": state,
                "idempotency_key": raw.get("idempotencyKey"), "request_fingerprint": raw.get("payloadHash"),
                "result": raw.get("result"), "ts": raw.get("observedAt"), "_line": line}, None
    ref = raw.get("effectRef")
    if not isinstance(ref, str) or not ref:
        return None, "effect line has no string effectRef"
    return {"event": "effect", "operation_id": op, "effect_ref": ref, "ts": raw.get("observedAt"), "_line": line}, None


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
        if (attempt.get("idempotency_key") != key or (attempt.get("attempt_budget_remaining") or 0) < 0
                or str(attempt.get("method") or "POST").upper() in SAFE_METHODS
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
    held = op.evidence_ids
    for evidence_id in cited:
        if evidence_id not in held:
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


class StreamingAudit:
    """Feeds lines in, calls ``emit(verdict)`` for each judged operation (``emit_clean(json_dict)`` instead
    for one the fast path vouched healthy; None to drop those); run-wide findings are kept."""

    def __init__(self, name: str, emit: Any, *, emit_clean: Any = None, window: int = 10_000) -> None:
        self.name = name
        self.emit = emit
        self.emit_clean = emit_clean
        self.window = window
        self.open: dict[str, OperationContext] = {}
        self.resolved: OrderedDict[str, None] = OrderedDict()
        self.closed: set[str] = set()
        self.pending: dict[str, list[Finding]] = defaultdict(list)
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

    def feed(self, line: int, text: str) -> None:
        record, error = parse_line(text)
        fmt = "events"
        if record is None and '"type"' in text:  # perhaps the article's effect-ledger format
            try:
                raw = from_json(text)
            except ValueError:
                raw = None
            if type(raw) is dict and "event" not in raw and raw.get("type") in ("attempt", "effect"):
                record, error = article_record(raw, line)
                fmt = "ledger"
        if error is not None:
            self.malformed += 1
            self._finding("H000", "log-well-formed", None, f"{self.name}:{line}: {error}", line)
            return
        self.events += 1
        if _may_hold_secret(text):
            hits = secret_hits(text, {})
            if hits:
                self._finding("H019", "no-secret-in-log", record["operation_id"],
                              f"{self.name}:{line} holds {', '.join(hits)}; log a reference and a fingerprint instead", line)
        record["_line"] = line
        op_id = record["operation_id"]
        op = self.open.get(op_id)
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
                if self.emit_clean is not None:
                    self.emit_clean(summary)
                return
        verdict = judge_operation(op, extra, held=False)
        self.classes[verdict.classification] += 1
        self.finding_count += len(verdict.findings)
        if verdict.classification != "healthy" or verdict.findings:
            self.unhealthy += 1
        self.emit(verdict)

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


def run_audit(path: Path, *, format: str = "text", out: TextIO = sys.stdout, err: TextIO = sys.stderr,
              window: int = 10_000) -> int:
    """Audit one file; see the module docstring for the exit status."""
    if format not in ("text", "json"):
        print(f"audit: --format {format!r} is not known; valid: json, text", file=err)
        return 2
    path = Path(path)
    if path.is_dir():
        print(f"audit: {path} is a folder; give the audit log file (e.g. {path / 'agent.ndjson'})", file=err)
        return 2
    handle = _open(path, err)
    if handle is None:
        return 2
    name = str(path)
    first = [True]

    def emit_clean(data: dict[str, Any]) -> None:
        # pydantic_core's Rust encoder: json.dumps was a fifth of the audit's time
        out.write(("\n    " if first[0] else ",\n    ") + to_json(data).decode())
        first[0] = False

    def emit_json(verdict: OperationVerdict) -> None:
        emit_clean(_op_json(verdict))

    def emit_text(verdict: OperationVerdict) -> None:
        if verdict.classification != "healthy" or verdict.findings:
            out.write("\n".join(render_operation(verdict, offline=True)) + "\n\n")

    audit = StreamingAudit(name, emit_json if format == "json" else emit_text,
                           emit_clean=emit_clean if format == "json" else None, window=window)
    if format == "json":
        out.write('{"file": ' + json.dumps(name) + ',\n  "operations": [')
    # The cyclic GC rescans the whole live heap (the window of resolved operations, the id sets) ever
    # more often on a long log; nothing the audit allocates outlives its operation through a cycle,
    # so reference counting frees it all and the collector is paused for the run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with handle:
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    audit.feed(number, text.rstrip("\r\n"))  # so parse errors point into the line itself
            audit.finish()
    finally:
        if collecting:
            gc.enable()
    usable = audit.events > 0
    status = 2 if not usable else (1 if audit.unhealthy or audit.run_findings else 0)
    summary = {"events": audit.events, "malformed_lines": audit.malformed,
               "operations": sum(audit.classes.values()), "classifications": dict(sorted(audit.classes.items())),
               "findings": audit.finding_count, "exit_status": status}
    if format == "json":
        out.write("\n  ],\n  \"findings\": " + json.dumps([f.to_dict() for f in audit.run_findings]) +
                  ",\n  \"summary\": " + json.dumps(summary) + "\n}\n")
    else:
        for finding in audit.run_findings:
            out.write("\n".join(_finding_lines(finding, "")) + "\n")
        counts = ", ".join(f"{n} {c}" for c, n in sorted(audit.classes.items())) or "no operations"
        out.write(f"{name}: {audit.events} events, {summary['operations']} operations ({counts}); "
                  f"{audit.finding_count} finding(s), {audit.malformed} malformed line(s)\n")
    if not usable:
        print(f"audit: {name} holds no usable audit event "
              f"({audit.malformed} malformed line(s)); expected NDJSON with 'event' or 'type' per line", file=err)
    return status


def _op_json(verdict: OperationVerdict) -> dict[str, Any]:
    data = verdict.to_dict()
    data.pop("held", None)
    return data
