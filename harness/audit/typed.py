"""The typed engine (the default): each line decoded once, by msgspec, into the typed struct of its event;
the clean stories triaged in Python as the SQL of ``harness.audit.triage`` triages them; the rest judged by
the rules (``StreamingAudit``), in file order.

msgspec does in compiled code what the SQL's features do field by field: a wrong type, a missing required
field or a field of the line's own fails the decode, and such a line (or one with a backslash, whose strings
may hold an escape, or a second ``event``/``type`` key) is ``loose``: the rules read it, and everything it
names (its operation, key, intent, the operations it refers to) goes to them with it, as in the SQL triage.
Both decoders keep a duplicate key's last value, as orjson and pydantic do for the rules.

One pass reads the files as bytes. Each operation is gathered until its story is told (a resolution, or an
effect in the article's format) and ``window`` more have been, as the stream judges them; then its clean
story, if it tells one, is written to a spill file with its line numbers, and otherwise its lines are kept
for the rules. What ties one operation to another (a key or an intent two use, a reference, a line the
rules read for secrets, a line after the window) is known only at the end: a clean operation so tied goes
to the rules too (its lines are read again). The output lists the clean operations first, then the others
as the rules judge them. Memory follows the operations (their ids, keys and intents, for the ties), not the
lines: about 0.3 KB an operation. A file Python reads otherwise than as bytes split at ``\\n`` (a carriage
return, a byte-order mark) raises ``EngineUnsuitable``: it is streamed.

The property and differential tests (tests/audit/test_triage.py) hold this engine's output to the stream's on
generated logs with every twist the SQL triage is tested on.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import multiprocessing
import os
import signal
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import IO, Annotated, Any, Literal

import msgspec

from harness.audit.article import NOT_SENT_WORDS, UNKNOWN_WORDS
from harness.audit.engines import EngineUnsuitable, forced_by, prescan
from harness.audit.files import FileLines, spans
from harness.audit.output import json_text
from harness.audit.stream import StreamingAudit, stats_of
from harness.checker import Finding
from harness.checker.context import SAFE_METHODS
from harness.errors import EvidenceError
from harness.events import (
    BOOL_OR_NONE,
    DICT_OR_NONE,
    FLOAT_OR_NONE,
    INT_OR_NONE,
    RETRY_REASONS,
    STR,
    STR_OR_NONE,
    STRS_OR_NONE,
    TS,
    VOUCH_PLANS,
    timestamp_seconds,
)
from harness.limits import collector_paused
from harness.ndjson import MAX_DEPTH

# -- the structs: each event's model (harness.events.VOUCH_PLANS, the one statement of the types) ----------------
_INT64 = Annotated[int, msgspec.Meta(ge=-(2 ** 63), le=2 ** 63 - 1)]  # what orjson and SQL read alike
_TYPES: dict[int, Any] = {
    STR: str, STR_OR_NONE: str | None, INT_OR_NONE: _INT64 | None, BOOL_OR_NONE: bool | None,
    # msgspec takes an integer for a float: the rules' pydantic makes the same float of it
    FLOAT_OR_NONE: float | None, TS: float | str, STRS_OR_NONE: list[str] | None, DICT_OR_NONE: dict[str, Any] | None}


def _struct(event: str) -> type[msgspec.Struct]:
    plan, required = VOUCH_PLANS[event]
    fields: list[Any] = []
    for name, check in plan.items():
        if name == "event":
            continue
        kind = Literal[tuple(sorted(check))] if isinstance(check, frozenset) else _TYPES[check]
        fields.append((name, kind) if name in required else (name, kind | None, None))
    return msgspec.defstruct(f"Typed{event.title()}", fields, tag_field="event", tag=event, kw_only=True,
                             forbid_unknown_fields=True, frozen=True)


Operation, Attempt, Observation, Resolution, Approval = (
    _struct(e) for e in ("operation", "attempt", "observation", "resolution", "approval"))
assert set(VOUCH_PLANS) == {"operation", "attempt", "observation", "resolution", "approval"}


class LedgerAttempt(msgspec.Struct, tag_field="type", tag="attempt", kw_only=True, forbid_unknown_fields=True,
                    frozen=True):
    """The article's attempt line (``harness.audit.article.article_record``); no field of the line's own."""
    operationId: str
    attemptId: str
    idempotencyKey: str | None = None
    payloadHash: str | None = None
    result: str | None = None
    observedAt: float | str | None = None


class LedgerEffect(msgspec.Struct, tag_field="type", tag="effect", kw_only=True, forbid_unknown_fields=True,
                   frozen=True):
    operationId: str
    effectRef: str
    observedAt: float | str | None = None


_EVENTS = msgspec.json.Decoder(Operation | Attempt | Observation | Resolution | Approval)
_LEDGER = msgspec.json.Decoder(LedgerAttempt | LedgerEffect)
# RecursionError: msgspec gives up on a line nested past the interpreter's limit; the rules read it (and say so)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def _plain(value: Any, depth: int = 1) -> bool:
    """Free-form data (an intent) as orjson and pydantic read it alike (``harness.events.plain_json``): no float,
    no integer beyond 64 bits, nested no deeper than the limits."""
    kind = value.__class__
    if kind is not dict and kind is not list:
        return kind is not float and (kind is not int or -(2 ** 63) <= value < 2 ** 64)
    if depth >= MAX_DEPTH:
        return False
    for item in value.values() if kind is dict else value:
        kind = item.__class__
        if kind is str or item is None or kind is bool:  # the usual values, without a call
            continue
        if not _plain(item, depth + 1):
            return False
    return True


_SECONDS: dict[str, float] = {}


def _seconds(ts: Any) -> float:
    """``harness.checker.readings.ts_value``, its strings remembered (a log's lines share their seconds)."""
    if ts.__class__ is str:
        value = _SECONDS.get(ts)
        if value is None:
            if len(_SECONDS) > 65_536:
                _SECONDS.clear()
            value = _SECONDS[ts] = timestamp_seconds(ts) or 0.0
        return value
    return float(ts) if ts is not None else 0.0


# -- the clean stories (harness.audit.fast_path.clean_summary's, and triage's _EVENTS_CLEAN / _ARTICLE_CLEAN) ----
def _attempt_json(number: int, a: Any) -> dict[str, Any]:
    return {"attempt_id": a.attempt_id, "dispatch_state": a.dispatch_state, "key": a.idempotency_key, "line": number,
            "retry_of_attempt_id": a.retry_of_attempt_id, "retry_reason": a.retry_reason, "wire": None,
            "destination_saw": []}


def _proves(a: Any) -> bool:
    status = a.http_status
    return a.dispatch_state == "response_received" and (status is None or (200 <= status < 300 and status != 202))


def events_story(op_id: str, lines: list[int], records: list[Any]) -> dict[str, Any] | None:
    """The JSON verdict of a clean story of our events, or None (``fast_path.clean_summary``, condition by
    condition: one operation event referring to nothing, one or two attempts under one key, a linked budgeted
    retry with the same payload, at most one observation, one ``succeeded`` resolution that cites what proves it,
    logged after, and names the one effect)."""
    declared = resolution = observation = None
    attempts: list[tuple[int, Any]] = []
    for number, record in zip(lines, records, strict=False):
        kind = record.__class__
        if kind is Attempt:
            attempts.append((number, record))
        elif kind is Operation and declared is None:
            declared = (number, record)
        elif kind is Resolution and resolution is None:
            resolution = (number, record)
        elif kind is Observation and observation is None:
            observation = (number, record)
        else:
            return None
    if declared is None or resolution is None or not attempts or len(attempts) > 2:
        return None
    d, (r_line, r) = declared[1], resolution
    if (r.state != "succeeded" or r.correction_operation_id is not None or d.supersedes_operation_id is not None
            or d.parent_operation_id is not None or d.correction_of_operation_id is not None
            or (d.intent is not None and not _plain(d.intent))):
        return None
    first = attempts[0][1]
    if first.retry_of_attempt_id is not None or first.retry_reason is not None:
        return None
    key = first.idempotency_key
    for _, a in attempts:
        if (a.idempotency_key != key or (a.attempt_budget_remaining or 0) < 0
                or (a.method and a.method.upper() in SAFE_METHODS) or (key and a.attempt_id in key)):
            return None
    if key and d.idempotency_key and key != d.idempotency_key:
        return None
    if len(attempts) == 2:
        second = attempts[1][1]
        prior = second.prior_request_fingerprint
        if (second.attempt_id == first.attempt_id or second.retry_of_attempt_id != first.attempt_id
                or second.retry_reason not in RETRY_REASONS or second.attempt_budget_remaining is None
                or first.attempt_budget_remaining == 0 or first.http_status == 429
                or second.request_fingerprint != first.request_fingerprint
                or (prior and prior != first.request_fingerprint)
                or (not key and (first.dispatch_state == "sent_no_response" or (first.http_status or 0) >= 500))):
            return None
    refs: dict[str, None] = {}
    for _, a in attempts:
        if a.dispatch_state == "response_received" and a.effect_refs:
            refs.update(dict.fromkeys(a.effect_refs))
    o = observation[1] if observation is not None else None
    if o is not None:
        if o.observation_id in (a.attempt_id for _, a in attempts):
            return None  # a cited id is an attempt's first (op.evidence_ids): none may be both
        if o.found is not False and o.effect_refs:
            refs.update(dict.fromkeys(o.effect_refs))
    named, cited = r.effect_refs, r.evidence
    if len(refs) != 1 or not named or not cited:
        return None
    (only,) = refs
    for ref in named:
        if ref != only:
            return None
    ts = _seconds(r.ts)
    proven = False
    freshest = 0
    for evidence_id in cited:
        for number, a in attempts:
            if a.attempt_id == evidence_id:
                proven = proven or _proves(a)
                record_line, record_ts = number, a.ts
                break
        else:
            if o is None or o.observation_id != evidence_id:
                return None
            proven = proven or o.found is True
            record_line, record_ts = observation[0], o.ts  # type: ignore[index]
        freshest = max(freshest, record_line)
        if record_line > r_line or _seconds(record_ts) > ts:  # H026: the evidence comes before the closure
            return None
    if not proven:  # H025
        return None
    for number, a in attempts:  # H034: nothing cited is older than the last dispatch
        if a.dispatch_state != "not_sent" and number > freshest:
            return None
    observations = [] if o is None else [{
        "observation_id": o.observation_id, "source": o.source, "found": o.found, "effect_refs": o.effect_refs,
        "lag_possible": o.lag_possible, "line": observation[0]}]  # type: ignore[index]
    return {"operation_id": op_id, "intent_id": d.intent_id, "intent": d.intent, "classification": "healthy",
            "state": "succeeded", "attempts": [_attempt_json(n, a) for n, a in attempts], "effects": [only],
            "findings": [], "observations": observations,
            "resolution": {"state": "succeeded", "evidence": cited, "effect_refs": named, "reason": r.reason,
                           "correction_operation_id": None, "line": r_line}}


def _dispatch(result: str | None) -> str:
    word = (result or "").lower()
    if word in NOT_SENT_WORDS:
        return "not_sent"
    return "sent_no_response" if word in UNKNOWN_WORDS else "response_received"


def ledger_story(op_id: str, lines: list[int], records: list[Any]) -> dict[str, Any] | None:
    """The article's clean story (``fast_path._ledger_summary``): one or two attempts under one non-empty key and
    one payload, the key holding no attempt's id, effect lines naming one effect, each timed no earlier than the
    first attempt that was sent."""
    attempts: list[tuple[int, Any]] = []
    ref = None
    for number, record in zip(lines, records, strict=False):
        if record.__class__ is LedgerAttempt:
            attempts.append((number, record))
        elif record.__class__ is LedgerEffect and record.effectRef and (ref is None or ref == record.effectRef):
            ref = record.effectRef
        else:
            return None
    if ref is None or not attempts or len(attempts) > 2:
        return None
    first = attempts[0][1]
    key, payload = first.idempotencyKey, first.payloadHash
    if not key or payload is None or (len(attempts) == 2 and attempts[1][1].attemptId == first.attemptId):
        return None
    sent = 0.0
    shown = []
    for number, a in attempts:
        if not a.attemptId or a.idempotencyKey != key or a.payloadHash != payload or a.attemptId in key:
            return None
        state = _dispatch(a.result)
        if state != "not_sent":
            ts = _seconds(a.observedAt)
            sent = ts if not sent else min(sent, ts)
        shown.append({"attempt_id": a.attemptId, "dispatch_state": state, "key": key, "line": number,
                      "retry_of_attempt_id": None, "retry_reason": None, "wire": None, "destination_saw": []})
    if sent <= 0.0:
        return None
    for record in records:
        if record.__class__ is LedgerEffect and _seconds(record.observedAt) < sent:
            return None
    return {"operation_id": op_id, "intent_id": None, "intent": None, "classification": "healthy", "state": "open",
            "attempts": shown, "effects": [ref], "findings": [], "observations": [], "resolution": None}


# -- the pass -----------------------------------------------------------------------------------------------------
class _Gathered:
    """An operation's lines while its story is told: their numbers and records, and whether one ties it to
    another operation or to the rules (a reference, a line the secret rule reads, a second format)."""

    __slots__ = ("lines", "records", "ledger", "tied")

    def __init__(self, ledger: bool) -> None:
        self.lines: list[int] = []
        self.records: list[Any] = []
        self.ledger = ledger
        self.tied = False


class TypedTriage:
    """The pass over one part of the lines: ``feed_block`` each block of lines (bytes), then ``close_all``, which
    returns what the part found (a ``PartFound``). The clean verdicts are written, one a line, to ``spill``."""

    def __init__(self, window: int, might_find: Callable[[str], bool], format: str, spill: IO[str]) -> None:
        self.window = window
        self.might_find = might_find
        self.pieces = format == "json"  # a text report shows no healthy operation
        self.spill = spill
        self.open: dict[str, _Gathered] = {}
        self.resolved: OrderedDict[str, None] = OrderedDict()
        self.found = PartFound()

    def _share(self, value: str, owner: str, op_id: str) -> None:
        """``value`` (a key, an intent) used by ``op_id`` after ``owner``: both tied."""
        self.found.shared.setdefault(value, {owner}).add(op_id)

    def feed_block(self, lines: list[bytes], first: int) -> None:
        """Lines ``first``, ``first + 1``, ... (each with or without its line break)."""
        joined = b"\n".join(lines)
        hinted = self.might_find(joined.decode("utf-8", "surrogateescape"))  # a line may hold a secret
        escaped = b"\\" in joined
        del joined
        number = first - 1
        found = self.found
        open_ops, closed, decode_events, decode_ledger = self.open, found.seen, _EVENTS.decode, _LEDGER.decode
        loose, owned, referenced, resolved, window = found.loose, found.owner.setdefault, found.referenced, \
            self.resolved, self.window
        for line in lines:
            number += 1
            if line[:1] != b"{":
                if line.strip():
                    loose.append(number)
                continue
            try:
                if escaped and b"\\" in line:
                    raise msgspec.DecodeError
                # msgspec checks a repeated tag against the first: a line holds one event, as orjson reads it
                if b'"event"' in line:
                    record = decode_events(line)
                    op_id = record.operation_id
                    ledger = False
                else:
                    record = decode_ledger(line)
                    op_id = record.operationId
                    ledger = True
                if not op_id:
                    raise msgspec.DecodeError
            except _DECODE_ERRORS:
                loose.append(number)
                continue
            op = open_ops.get(op_id)
            if op is None:
                if op_id in closed:  # after its window: the rules say so
                    found.late.add(op_id)
                    found.bound.append(number)
                    continue
                op = open_ops[op_id] = _Gathered(ledger)
            elif op.ledger != ledger:  # both formats: the rules judge it (as events, as the stream does)
                op.tied = True
                op.ledger = False
            op.lines.append(number)
            op.records.append(record)
            if hinted and self.might_find(line.decode("utf-8", "surrogateescape")):
                op.tied = True
            kind = record.__class__
            if kind is Attempt:
                key = record.idempotency_key
                if key and (owner := owned(key, op_id)) != op_id:
                    self._share(key, owner, op_id)
            elif kind is LedgerAttempt:
                key = record.idempotencyKey
                if key and (owner := owned(key, op_id)) != op_id:
                    self._share(key, owner, op_id)
            elif kind is Operation:
                for value in (record.idempotency_key, record.intent_id):
                    if value and (owner := owned(value, op_id)) != op_id:
                        self._share(value, owner, op_id)
                for ref in (record.supersedes_operation_id, record.parent_operation_id,
                            record.correction_of_operation_id):
                    if ref is not None:
                        referenced.add(ref)
                        op.tied = True
            elif kind is Resolution:
                if record.correction_operation_id is not None:
                    referenced.add(record.correction_operation_id)
                    op.tied = True
            elif kind is Approval:
                op.tied = True
                found.session = found.session or record.scope == "session"
            if kind is Resolution or (kind is LedgerEffect and op.ledger):
                if op_id in resolved:
                    resolved.move_to_end(op_id)
                else:
                    resolved[op_id] = None
                    if len(resolved) > window:
                        self._close(resolved.popitem(last=False)[0])

    def _close(self, op_id: str) -> None:
        op = self.open.pop(op_id)
        found = self.found
        found.seen.add(op_id)
        story = None
        if not op.tied:
            story = (ledger_story if op.ledger else events_story)(op_id, op.lines, op.records)
        if story is None:
            if op.tied:
                found.bound.extend(op.lines)
            else:
                found.alone[op_id] = array("q", op.lines)
            return
        found.spilled.append(op_id)
        found.spans.append(op.lines[0])
        found.spans.append(op.lines[-1])
        found.clean_lines += len(op.lines)
        if self.pieces:
            self.spill.write(json_text(story) + "\n")

    def close_all(self) -> PartFound:
        """Every operation still open closed (its clean verdict spilled, or its lines routed): the part's end."""
        for op_id in list(self.open):
            self._close(op_id)
        self.spill.flush()
        return self.found


class PartFound:
    """What the pass over one part found, sent back from a worker process (pickled): the lines the rules must
    read, those of operations judged alone (``alone``: by operation) and those judged beside others (``bound``:
    an operation tied by its own lines, lines after a window), the lines the decoders refused (``loose``), the
    clean operations spilled (``spilled``, their first and last lines in ``spans``), every operation seen, and
    what ties operations together (the first operation to use a key or an intent, those used by more than one,
    the operations referred to, those seen after their window, a session approval)."""

    def __init__(self) -> None:
        self.alone: dict[str, array[int]] = {}
        self.bound = array("q")
        self.loose = array("q")
        self.spilled: list[str] = []
        self.spans = array("q")
        self.clean_lines = 0
        self.seen: set[str] = set()
        self.owner: dict[str, str] = {}  # key or intent -> the first operation that used it
        self.shared: dict[str, set[str]] = {}  # one used by more than one: its operations
        self.referenced: set[str] = set()
        self.late: set[str] = set()
        self.session = False


def tied_operations(parts: list[PartFound], forced: list[str]) -> set[str]:
    """The operations whose clean verdicts do not stand: tied to another one (a shared key or intent, a
    reference, lines after the window or in two parts) or named by a line the decoders refused (``forced``)."""
    tied: set[str] = set()
    owner: dict[str, str] = {}
    seen: set[str] = set()
    for part in parts:
        tied |= part.late
        tied |= part.referenced
        for ops in part.shared.values():
            tied |= ops
        tied |= seen & part.seen  # an operation whose lines two parts hold
        seen |= part.seen
        for value in owner.keys() & part.owner.keys():
            if owner[value] != part.owner[value]:
                tied.add(owner[value])
                tied.add(part.owner[value])
        owner = part.owner | owner  # the first part's owner stands
    for value in forced:
        tied.add(value)
        first = owner.get(value)
        if first is not None:
            tied.add(first)
    return tied


def clean_verdicts(part: PartFound, spill: IO[str], drop: Callable[[str], bool], write: Callable[[str], None],
                   pieces: bool) -> list[tuple[str, int, int]]:
    """The clean verdicts of a part that stand written (``write``); those ``drop`` refuses returned as (operation,
    first line, last line): the rules read their lines again."""
    spill.seek(0)
    lines = iter(spill) if pieces else None
    spans_ = part.spans
    dropped = []
    for index, op_id in enumerate(part.spilled):
        piece = next(lines)[:-1] if lines is not None else ""
        if drop(op_id):
            dropped.append((op_id, spans_[2 * index], spans_[2 * index + 1]))
        elif piece:
            write(piece)
    return dropped


def _operation_of(text: str) -> str | None:
    """The operation of a line the decoders read (a clean operation's, read again)."""
    line = text.encode("utf-8", "surrogateescape")
    try:
        record = _EVENTS.decode(line) if b'"event"' in line else _LEDGER.decode(line)
    except _DECODE_ERRORS:
        return None
    if isinstance(record, LedgerAttempt | LedgerEffect):
        return record.operationId
    return record.operation_id


Piece = tuple[str, int, int, int]  # a file's bytes [start, end) whose first line is line ``number`` of the log


def split(files: list[tuple[str, int]], parts: int) -> list[list[Piece]]:
    """The log (``files``: each path with its number of lines) cut into ``parts`` of about the same bytes, each
    cut at the start of a line: a part is its pieces of files, in order."""
    sizes = [os.path.getsize(path) for path, _ in files]
    total = sum(sizes)
    targets = [total * k // parts for k in range(1, parts)]
    cuts: list[tuple[int, int, int]] = []  # (file index, byte offset, line number there)
    offset, number = 0, 1
    for index, ((path, lines), size) in enumerate(zip(files, sizes, strict=True)):
        inside = [t - offset for t in targets if offset < t < offset + size]
        if inside:
            cuts += [(index, at, number + before) for at, before in _line_starts(path, inside)]
        offset += size
        number += lines
    bases = [1]  # each file's first line number in the log
    for _, lines in files:
        bases.append(bases[-1] + lines)
    bounds = [(0, 0, 1), *cuts, (len(files) - 1, sizes[-1] if sizes else 0, number)]
    result: list[list[Piece]] = []
    for (f0, at0, n0), (f1, at1, _) in zip(bounds, bounds[1:], strict=False):
        pieces: list[Piece] = []
        for index in range(f0, f1 + 1):
            start = at0 if index == f0 else 0
            end = at1 if index == f1 else sizes[index]
            if end > start:
                pieces.append((files[index][0], start, end, n0 if index == f0 else bases[index]))
        result.append(pieces)
    return [part for part in result if part]


def _line_starts(path: str, targets: list[int]) -> list[tuple[int, int]]:
    """For each byte offset of ``targets`` (ascending, inside the file), the start of the first line at or after
    it, and the number of lines before that start."""
    found: list[tuple[int, int]] = []
    lines = counted = 0
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        for target in targets:
            end = view.find(b"\n", target - 1)  # the line break before the target, or the one ending its line
            start = len(view) if end < 0 else end + 1
            while counted < start:  # in slices, so as not to copy the file
                step = min(start, counted + (8 << 20))
                lines += view[counted:step].count(b"\n")
                counted = step
            found.append((start, lines))
    return found


def _blocks(pieces: list[Piece]) -> Any:
    """Each piece's lines in blocks of about 4 MB (bytes, split at ``\\n`` alone, as Python's text mode splits a
    file that holds no carriage return), with the number of the block's first line."""
    for path, start, end, number in pieces:
        with open(path, "rb") as handle:
            handle.seek(start)
            left = end - start
            rest = b""
            while left > 0:
                block = handle.read(min(4 << 20, left))
                if not block:
                    break
                left -= len(block)
                block = rest + block
                cut = block.rfind(b"\n") + 1 if left > 0 else len(block)
                rest = block[cut:]
                lines = block[:cut].split(b"\n")
                if lines[-1] == b"":
                    lines.pop()
                if lines:
                    yield lines, number
                    number += len(lines)
            if rest:
                yield [rest], number


def _triage(pieces: list[Piece], window: int, might_find: Callable[[str], bool], format: str, spill: IO[str],
            progress: Callable[[int], None] | None = None) -> PartFound:
    """One part's pass (in this process or a worker's)."""
    triage = TypedTriage(window, might_find, format, spill)
    for lines, number in _blocks(pieces):
        triage.feed_block(lines, number)
        if progress is not None:
            progress(sum(map(len, lines)))
    return triage.close_all()


def _die_with(parent: int) -> None:
    """This worker killed with its parent, on Linux (prctl PR_SET_PDEATHSIG): a killed audit leaves no worker."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker ends with its part, its pipe to nobody
        return
    if os.getppid() != parent:  # the parent was gone before the call
        os._exit(1)


def _answer(send: Any, task: Callable[[], Any], parent: int) -> None:
    """A forked worker: its task's result sent back, or the error it met, as text; then gone at once, touching
    nothing of its parent's (standard streams another thread may have held at the fork, exit handlers)."""
    _die_with(parent)
    try:
        result = task()
    except BaseException as exc:  # noqa: B036 (anything, said to the parent rather than lost with the process)
        result = _Failed(f"{type(exc).__name__}: {exc}")
    try:
        send.send(result)
        send.close()
    finally:
        os._exit(0)


class _Failed(str):
    """A worker's error, as its parent reports it."""


def in_workers(tasks: list[Callable[[], Any]]) -> list[Any]:
    """Each task's result: every task but the last run by a forked worker (nothing pickled but the result), the
    last by this process meanwhile. A worker that fails or dies is an ``EvidenceError``; none outlives the call."""
    context = multiprocessing.get_context("fork")
    started = []
    try:
        for task in tasks[:-1]:
            receive, send = context.Pipe(duplex=False)
            worker = context.Process(target=_answer, args=(send, task, os.getpid()), daemon=True)
            worker.start()
            send.close()
            started.append((worker, receive))
        mine = tasks[-1]()
        results = []
        for worker, receive in started:
            try:
                answer = receive.recv()
            except EOFError:
                worker.join()
                raise EvidenceError(f"the audit's worker process {worker.pid} ended (exit status {worker.exitcode}) "
                                    "before sending what it found; run again, or with --engine stream") from None
            if isinstance(answer, _Failed):
                raise EvidenceError(f"the audit's worker process {worker.pid} failed: {answer}")
            results.append(answer)
        return [*results, mine]
    finally:
        for worker, receive in started:
            receive.close()
            if worker.is_alive():
                worker.kill()
            worker.join()


def workers_for(size: int, asked: int | None = None) -> int:
    """How many processes read a log of ``size`` bytes: ``asked``, else one a core up to four from 16 MB on
    (forking costs a few milliseconds a worker; a worker reads about 30 MB a second); one where this system
    cannot fork."""
    if asked is not None and asked < 1:
        raise ValueError(f"workers {asked}: give 1 or more")
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if asked is not None:
        return asked
    if size < 16 << 20:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(4, cores))


def _judged(audit: StreamingAudit, files: list[tuple[str, int]], lines: Iterable[int]) -> StreamingAudit:
    """``audit`` fed ``lines`` (ascending) read again from the files, and finished."""
    might_find = audit.run_rules.might_find
    with contextlib.closing(FileLines(spans(list(files)))) as lines_of:
        for line in lines:
            text = lines_of.line(line)
            if text.strip():  # as the stream skips a blank line
                audit.feed(line, text, might_find(text))
    audit.finish()
    return audit


def _judge_alone(name: str, format: str, window: int, files: list[tuple[str, int]], lines: list[int],
                 out: IO[str]) -> tuple[dict[str, Any], list[Finding]]:
    """Operations judged alone by the rules (in a worker): their verdicts written to ``out``; the stats and the
    run-wide findings returned."""
    end = "\n" if format == "json" else ""  # a JSON verdict a line; a text one ends with its blank line
    audit = _judged(StreamingAudit(name, lambda op, piece: out.write(piece + end) if piece else None,
                                   format=format, window=window), files, lines)
    out.flush()
    return stats_of(audit), audit.run_findings


def _pieces(out: IO[str], write: Callable[[str], None], format: str) -> None:
    """The verdicts a worker wrote to ``out``, one a line (JSON) or in blocks (text), written on."""
    out.seek(0)
    if format == "json":
        for piece in out:
            write(piece[:-1])
    else:
        while block := out.read(1 << 20):
            write(block)


@collector_paused()  # the gathered operations and the ties are long-lived
def audit_typed(paths: list[str], name: str, format: str, window: int, write: Callable[[str], None],
                progress: Callable[[int, int], None] | None = None, size: int = 0,
                workers: int | None = None) -> tuple[dict[str, Any], list[Finding], list[tuple[str, int]]]:
    """The typed engine over ``paths`` as one log; returns the stats, the run-wide findings and the files read
    (as ``harness.audit.engines.audit_with``). ``workers``: processes reading the log (``workers_for``), each a
    part of it, and then judging a share of the operations the rules judge alone; an operation whose lines two
    parts hold, or tied to another, is judged by this process, beside all those it is tied to."""
    counts = [prescan(path) for path in paths]  # EngineUnsuitable: a carriage return, a byte-order mark
    files = list(zip(paths, counts, strict=True))
    audit = StreamingAudit(name, lambda op, piece: write(piece) if piece else None, format=format, window=window)
    might_find = audit.run_rules.might_find
    parts = split(files, workers_for(size, workers)) or [[]]
    pieces = format == "json"
    read = [0]

    def advance(done: int) -> None:
        read[0] += done * len(parts)  # this process reads one part of them
        progress(min(size, read[0]) * 2 // 3, 0)  # type: ignore[misc]

    def triage(part: list[Piece], spill: IO[str], report: Callable[[int], None] | None = None) -> Callable[[], Any]:
        return lambda: _triage(part, window, might_find, format, spill, report)

    with contextlib.ExitStack() as stack:
        def scratch() -> IO[str]:
            return stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", prefix="retry-harness-typed-"))

        spills = [scratch() for _ in parts]
        found: list[PartFound] = in_workers([triage(part, spill) for part, spill in zip(parts[:-1], spills,
                                                                                           strict=False)]
                                            + [triage(parts[-1], spills[-1], None if progress is None else advance)])
        loose = sorted(n for part in found for n in part.loose)
        with contextlib.closing(FileLines(spans(list(files)))) as lines_of:
            forced, session = forced_by((n, lines_of.line(n)) for n in loose)
        tied = tied_operations(found, forced)
        session = session or any(part.session for part in found)
        tied_clean: list[tuple[str, int, int]] = []
        for part, spill in zip(found, spills, strict=True):
            tied_clean += clean_verdicts(part, spill, lambda op_id: session or op_id in tied, write, pieces)
            spill.truncate(0)
        # the rules: the operations tied to others (or to the whole log, by a session approval) here, beside
        # one another; those judged alone shared between the workers and this process
        mine = set(loose)
        alone: list[array[int]] = []
        for part in found:
            mine.update(part.bound)
            for op_id, lines in part.alone.items():
                if session or op_id in tied:
                    mine.update(lines)
                else:
                    alone.append(lines)
        shares: list[list[int]] = [[] for _ in parts]
        for index, lines in enumerate(alone):  # in file order, each worker about as many operations
            shares[index * len(parts) // len(alone)].extend(lines)
        clean_lines = sum(part.clean_lines for part in found)
        clean_ops = sum(len(part.spilled) for part in found) - len(tied_clean)
        del found
        mine.update(shares.pop())
        # a clean operation tied to another: its lines lie between its first and last, among others'
        again = {op_id for op_id, _, _ in tied_clean}
        maybe = {n for _, first, last in tied_clean for n in range(first, last + 1)} - mine
        total = sum(counts) or 1

        def judge_mine() -> StreamingAudit:
            nonlocal clean_lines
            ordered = sorted(mine | maybe)
            with contextlib.closing(FileLines(spans(list(files)))) as lines_of:
                for count, line in enumerate(ordered):
                    text = lines_of.line(line)
                    if line in maybe:
                        if _operation_of(text) not in again:
                            continue
                        clean_lines -= 1
                    if text.strip():  # as the stream skips a blank line
                        audit.feed(line, text, might_find(text))
                    if progress is not None and count % 50_000 == 0:
                        progress(size * 2 // 3 + int(size / 3 * line / total), audit.unhealthy)
            audit.finish()
            return audit

        outs = [scratch() for _ in shares]
        judged = in_workers([(lambda share=share, out=out: _judge_alone(name, format, window, files, sorted(share),
                                                                          out))
                             for share, out in zip(shares, outs, strict=True)] + [judge_mine])
        stats = stats_of(audit)
        run_findings = list(audit.run_findings)
        for out, (theirs, findings) in zip(outs, judged[:-1], strict=True):
            _pieces(out, write, format)
            for field in ("events", "malformed", "unhealthy", "findings"):
                stats[field] += theirs[field]
            for kind, count in theirs["classes"].items():
                stats["classes"][kind] = stats["classes"].get(kind, 0) + count
            run_findings += findings
    if progress is not None:
        progress(size, stats["unhealthy"])
    if clean_ops:
        stats["classes"]["healthy"] = stats["classes"].get("healthy", 0) + clean_ops
    stats["events"] += clean_lines
    return stats, run_findings, files


__all__ = ["EngineUnsuitable", "PartFound", "TypedTriage", "audit_typed", "events_story", "ledger_story", "in_workers",
           "split", "workers_for"]
