"""The evidence folder of one scenario run and the ``Evidence`` object the checker judges.

The layout is ``harness.contract.EvidenceLayout``: the agent's audit log, the proxy journal, the
ledger dump and the context. Every file is optional: a missing file is an empty source, so an agent
that wrote nothing is still judged, and fails.

Every record keeps where it came from: log and journal records get ``_line`` (1-based line number),
ledger rows keep their ``seq``. A malformed log line does not stop loading: it becomes a
``log_errors`` entry with its line number, and rule H000 reports it.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from harness.chain import harness_run, verify_checkpoint_file
from harness.contract import (
    AGENT_LOG_FILE,
    BLACK_BOX_MODE,
    CHECKPOINT_FILE,
    CHECKPOINT_KEY_FILE_ENV,
    CHECKPOINTS_KEY,
    COMPLETENESS_KEY,
    EVENTS_MODE,
    INTERRUPTED_KEY,
    JOURNAL_CHECKPOINT_FILE,
    JOURNAL_FILE,
    JUDGING_MODES,
    LEDGER_CHECKPOINT_FILE,
    LEDGER_DUMP_FILE,
    LEDGER_SEAL_KEY,
    LIMITS_KEY,
    OTEL_AGENT_LOG,
    PROBE_FAILURES_KEY,
    REPORT_OUTCOMES,
    REPORT_PREFIX,
    TEARDOWN_PROBLEMS_KEY,
    TRACE_CHECKPOINT_FILE,
    TRACE_EVENTS_FILE,
    TRACE_FILE,
    ContextKey,
    ContractError,
    DestinationContract,
    EvidenceLayout,
)
from harness.errors import EvidenceError
from harness.events import parse_line
from harness.journal import IN_FLIGHT_AT_END, JournalError, read_journal
from harness.limits import EvidenceLimits, collector_paused
from harness.ndjson import numbered_lines, share_strings
from harness.safe_files import HARNESS_FILE_BYTES, UnsafeFile, open_regular, open_regular_text, read_regular
from harness.sandbox import dies_with_its_kill


@dataclass
class Evidence:
    """What the checker reads: the agent's word, the wire's, and the destinations' ground truth."""

    events: list[dict[str, Any]] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # destinations and secrets as the context file holds them: load_evidence checks that each is an object,
    # not its entries (a destination's {"spec", "contract"}, a secret's string); their readers check those
    destinations: dict[str, Any] = field(default_factory=dict)
    intents: list[dict[str, Any]] = field(default_factory=list)
    secrets: dict[str, Any] = field(default_factory=dict)
    log_errors: list[dict[str, Any]] = field(default_factory=list)
    # Added fields (the contract allows additions): where the log's lines are read again for the secret search
    # (``log_lines``): its file, whose lines are not kept (they weigh as much again as the events), or, for a log
    # with no file of its own (the events read from a trace), their texts (line n at index n - 1, "" for a blank
    # line); and what the harness knows of the run.
    log_file: Path | None = None
    raw_log: list[str] = field(default_factory=list)
    scenario: str | None = None
    agent: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None
    log_name: str = AGENT_LOG_FILE  # how findings name the log (FILE:LINE); the offline audit names the file as given
    # Why the harness lost evidence of this run (empty when it is whole): which source, and why. A front
    # end never judges incomplete evidence: it reports INCOMPLETE instead.
    incomplete: list[str] = field(default_factory=list)
    expect: dict[str, Any] | None = None  # the scenario's own expectations, as the run kept them
    not_applicable: dict[str, Any] | None = None  # the catalogue's scenarios the run's project cannot take, and why
    # how the run is judged: EVENTS_MODE (its audit log beside the wire) or BLACK_BOX_MODE (the wire alone)
    mode: str = EVENTS_MODE
    # a killed, sandboxed run's session_id that a later process wrote under (``reused_sessions``): {session:
    # {"agent_run": N, "lines": [...]}}, what H020 names
    reused_sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what the program told its caller of each intent: its report lines on stdout (``read_reports``), each
    # {"intent_id", "outcome", "effect_ref", "_line"}, or {"_line", "problem"} for a line that is no report
    reports: list[dict[str, Any]] = field(default_factory=list)

    def log_lines(self) -> Generator[tuple[int, str], None, None]:
        """``(line number, text)`` of each line of the log that is not blank, in order, as it was read."""
        if self.log_file is not None:
            with open_regular_text(self.log_file, UNBOUNDED) as handle:  # bounded when first read (load_events)
                yield from numbered_lines(handle)
        else:
            yield from ((number, text) for number, text in enumerate(self.raw_log, 1) if text)


UNBOUNDED = 1 << 62  # the agent log's bound is its limit (``EvidenceLimits.agent_log_bytes``), said as a LimitHit


class LimitHit(Exception):
    """A log beyond an ``EvidenceLimits`` limit; the message is ``EvidenceLimits.hit``'s sentence."""


def load_events(path: Path, evidence: Evidence,
                read: Callable[[str], tuple[dict[str, Any] | None, str | None]] = parse_line,
                limits: EvidenceLimits | None = None, strings: dict[str, str] | None = None) -> None:
    """The log's lines into ``evidence``; ``read`` parses one (the offline audit's also reads the article's).
    ``strings``: shared with the rest of the evidence (``harness.ndjson.share_strings``).

    ``limits``: a log over ``agent_log_bytes`` is not read; reading stops at a line over ``line_bytes`` or
    at the first event of an operation past ``operations``. Either way ``LimitHit`` says which, and
    ``evidence`` holds nothing of the log (none of it is judged)."""
    raw = open_regular(path, UNBOUNDED)  # a FIFO, a device, a symlink: an UnsafeFile, nothing read
    size = os.fstat(raw.fileno()).st_size
    if limits is not None and size > limits.agent_log_bytes:  # from its size, before a byte is read
        raw.close()
        raise LimitHit(limits.hit("agent_log_bytes", path.name, size))
    operations: set[Any] = set()
    evidence.log_file = path
    try:
        with io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape") as handle:
            for number, text in numbered_lines(handle):
                if limits is not None and len(text) > limits.line_bytes // 4:  # at most 4 UTF-8 bytes a character
                    size = len(text.encode("utf-8", "surrogateescape"))
                    if size > limits.line_bytes:
                        raise LimitHit(limits.hit("line_bytes", f"{path.name}:{number}", size))
                value, error = read(text)
                if value is None:
                    evidence.log_errors.append({"line": number, "error": error})
                    continue
                if limits is not None:
                    operation = value.get("operation_id")
                    if operation not in operations:
                        operations.add(operation)
                        if len(operations) > limits.operations:
                            raise LimitHit(limits.hit("operations", f"{path.name}:{number} (operation {operation})",
                                                      len(operations)))
                value["_line"] = number
                evidence.events.append(value if strings is None else share_strings(value, strings))
    except LimitHit:
        evidence.events, evidence.log_file, evidence.log_errors = [], None, []  # nothing of it is judged
        raise


def load_trace(path: Path, evidence: Evidence, name: str | None = None) -> None:
    """An agent's OpenTelemetry trace (OTLP JSON, ``harness.otel.reader``) into ``evidence`` as the events its
    spans carry, in log order: line n of the log the checker judges is the n-th item read (findings name it
    ``evidence.log_name:n``; each event's ``otel`` field names its span and the trace file's line). What the
    reader could not map is a malformed line (H000), never a silent pass."""
    from harness.otel.reader import read_trace

    derived = read_trace(path, name or path.name)
    for number, (record, error, text) in enumerate(derived.items, 1):
        evidence.raw_log.append(text)
        if record is None:
            evidence.log_errors.append({"line": number, "error": error})
            continue
        record["_line"] = number
        evidence.events.append(record)


TRACEPARENT_IDS = len("00-") + 32 + len("-") + 16  # version, trace id and parent id: what names the span


def _wire_trace_flags(events: list[dict[str, Any]], journal: list[dict[str, Any]]) -> None:
    """An attempt read from a span names it by trace and span id; its flags are what the agent sent (OTLP may not
    keep them): the traceparent the journal holds for the same ids, so the checker matches it exactly."""
    sent = {tp[:TRACEPARENT_IDS]: tp for entry in journal if isinstance(tp := entry.get("traceparent"), str)}
    for event in events:
        tp = event.get("traceparent")
        if isinstance(tp, str) and tp[:TRACEPARENT_IDS] in sent:
            event["traceparent"] = sent[tp[:TRACEPARENT_IDS]]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(read_regular(path, HARNESS_FILE_BYTES))
    except ValueError as exc:
        raise EvidenceError(f"{path}: not valid JSON ({exc}); the harness writes this file, so the run "
                            f"that produced it did not finish writing it") from exc
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read it ({exc.strerror or exc})") from exc


@collector_paused()
def load_evidence(folder: Path, *, key_file: Path | None = None,
                  limits: Mapping[str, int] | None = None) -> Evidence:
    """Read an evidence folder. Raises ``EvidenceError`` only when the folder itself is unusable.
    ``key_file``: the key of the agent log's checkpoint, when the operator's (see ``evidence_gaps``).
    How much of the agent's log is read: the limits the run kept in its context.json (else the defaults,
    ``EvidenceLimits()``), ``limits`` over them (``{"operations": 500_000}``); a log beyond them is not read
    and the evidence is incomplete, saying which limit and how to raise it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EvidenceError(f"evidence folder {folder} does not exist or is not a folder")
    evidence = Evidence(folder=folder)
    layout = EvidenceLayout(folder)
    strings: dict[str, str] = {}  # every source's ids, keys and fingerprints held once (share_strings)
    unsealed = context_seal_gaps(layout, key_file)  # before a word of context.json is believed
    context_data = share_strings(_load_json(layout.context), strings) \
        if layout.context.exists() or layout.context.is_symlink() else None
    try:
        kept = EvidenceLimits.from_dict(context_data.get(LIMITS_KEY) if isinstance(context_data, dict) else None)
    except ValueError as exc:
        raise EvidenceError(f"{layout.context}: {LIMITS_KEY}: {exc}") from None
    try:
        read_limits = kept.with_values((limits or {}).items())
    except ValueError as exc:
        raise EvidenceError(str(exc)) from None
    over_limit: list[str] = []
    try:
        if isinstance(context_data, dict) and context_data.get(ContextKey.AGENT_LOG) == OTEL_AGENT_LOG:
            evidence.log_name = TRACE_EVENTS_FILE  # the agent's word is its spans (agent_log: otel)
            if layout.trace.exists() or layout.trace.is_symlink():
                with open_regular(layout.trace, UNBOUNDED) as trace:
                    size = os.fstat(trace.fileno()).st_size
                if size > read_limits.agent_log_bytes:
                    raise LimitHit(read_limits.hit("agent_log_bytes", layout.trace.name, size))
                load_trace(layout.trace, evidence)
        elif layout.agent_log.exists() or layout.agent_log.is_symlink():
            load_events(layout.agent_log, evidence, limits=read_limits, strings=strings)
    except (LimitHit, UnsafeFile) as exc:
        over_limit.append(f"agent log: {exc}")
    try:
        evidence.journal = read_journal(layout.journal, strings)
    except (JournalError, UnsafeFile) as exc:  # the proxy writes no such line: not the journal it wrote
        over_limit.append(f"proxy journal: {exc}; it is not the journal the fault proxy wrote, so nothing was judged")
    if evidence.log_name == TRACE_EVENTS_FILE:
        _wire_trace_flags(evidence.events, evidence.journal)
    # the caller's view is a black-box program's evidence (H049); an agent with a log is judged on the log, and its
    # stdout is its own business
    if isinstance(context_data, dict) and context_data.get(ContextKey.MODE) == BLACK_BOX_MODE:
        try:
            evidence.reports = read_reports(layout.agent_stdout, read_limits.agent_log_bytes)
        except UnsafeFile as exc:
            over_limit.append(f"agent stdout: {exc}")
    ledger = layout.ledger_dump
    recovered_by = None
    if ledger.exists():
        data = _load_json(ledger)
        if not isinstance(data, dict):
            raise EvidenceError(f"{ledger}: expected an object with 'effects' and 'requests' lists")
        for key in ("effects", "requests"):
            rows = data.get(key, [])
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise EvidenceError(f"{ledger}: key {key!r} must be a list of row objects")
            setattr(evidence, key, share_strings(rows, strings))
        recovered_by = data.get("recovered_by")
    context = layout.context
    if context_data is not None:
        data = context_data
        if not isinstance(data, dict):
            raise EvidenceError(f"{context}: expected an object with keys scenario, destinations, intents, "
                                f"secrets, agent")
        evidence.scenario = data.get(ContextKey.SCENARIO)
        for key, kind in ((ContextKey.DESTINATIONS, dict), (ContextKey.INTENTS, list), (ContextKey.SECRETS, dict),
                          (ContextKey.AGENT, dict), (ContextKey.EXPECT, dict), (ContextKey.NOT_APPLICABLE, dict)):
            value = data.get(key)
            if value is None:
                continue
            if not isinstance(value, kind):
                raise EvidenceError(f"{context}: key {key!r} must be a {kind.__name__}, got {type(value).__name__}")
            setattr(evidence, key, value)
        mode = data.get(ContextKey.MODE, EVENTS_MODE)
        if mode not in JUDGING_MODES:
            raise EvidenceError(f"{context}: key {ContextKey.MODE!r} is {mode!r}; valid: {', '.join(JUDGING_MODES)}")
        evidence.mode = mode
        _check_contracts(context, evidence.destinations)
        # an unsealed context is never believed, but what it says was lost is said too (more reasons, never fewer)
        # the log is scanned once for what killed runs' sessions wrote after the kill: a gap, or H020's evidence
        late = lines_after_kill(layout.agent_log, data.get(ContextKey.AGENT), read_limits.agent_log_bytes)
        evidence.incomplete = evidence_gaps(layout, data, evidence.journal, recovered_by, key_file, late)
        evidence.reused_sessions = reused_sessions(late)
    # whatever the folder: a log not read is never judged
    evidence.incomplete = unsealed + evidence.incomplete + over_limit
    return evidence


def read_reports(path: Path, limit: int) -> list[dict[str, Any]]:
    """The report lines of a program's stdout (``REPORT_PREFIX``: what it told its caller of each intent), in
    order, each with its line number; a prefixed line that is no report keeps the line and says why. None when
    the program wrote no stdout (a container agent's goes to its own log)."""
    if not (path.exists() or path.is_symlink()):
        return []
    reports: list[dict[str, Any]] = []
    with open_regular_text(path, limit) as handle:
        for number, text in numbered_lines(handle):
            if not text.startswith(REPORT_PREFIX):
                continue
            try:
                doc = json.loads(text[len(REPORT_PREFIX):])
            except ValueError as exc:
                reports.append({"_line": number, "problem": f"not JSON ({exc})"})
                continue
            if not isinstance(doc, dict) or not isinstance(doc.get("intent_id"), str) \
                    or doc.get("outcome") not in REPORT_OUTCOMES:
                reports.append({"_line": number, "problem": "expected an object with intent_id (a string) and "
                                f"outcome (one of {', '.join(REPORT_OUTCOMES)})"})
                continue
            ref = doc.get("effect_ref")
            reports.append({"intent_id": doc["intent_id"], "outcome": doc["outcome"],
                            "effect_ref": ref if isinstance(ref, str) else None, "_line": number})
    return reports


# what a run signs at its end (harness.engine): the file -> its checkpoint, and what a gap calls it
_CHECKPOINTED = {AGENT_LOG_FILE: CHECKPOINT_FILE, TRACE_FILE: TRACE_CHECKPOINT_FILE,
                 LEDGER_DUMP_FILE: LEDGER_CHECKPOINT_FILE, JOURNAL_FILE: JOURNAL_CHECKPOINT_FILE}
_CHECKPOINT_NAMES = {CHECKPOINT_FILE: ("agent log", "the log the harness checkpointed when the agent exited"),
                     TRACE_CHECKPOINT_FILE: ("agent trace", "the trace the harness checkpointed when the agent exited"),
                     LEDGER_CHECKPOINT_FILE: ("effect ledger", f"the {LEDGER_DUMP_FILE} the harness saved at the end "
                                                               "of the run"),
                     JOURNAL_CHECKPOINT_FILE: ("proxy journal", "the journal the fault proxy wrote (it signed every "
                                                                "byte it wrote)")}


def context_seal_gaps(layout: EvidenceLayout, key_file: Path | None = None) -> list[str]:
    """Why context.json cannot be believed, or []: a folder a run of the harness made on this machine (its key
    store entry, ``harness.chain.harness_run``), or any folder checked under the operator's key, must hold the
    context.json its teardown sealed, unchanged. Any other folder (hand-built, from another machine or user with a
    run's key) is judged as it is: nothing vouches for it, and ``check`` says so only through what it lacks."""
    operator = key_file is not None or bool(os.environ.get(CHECKPOINT_KEY_FILE_ENV))
    if not (operator or harness_run(layout.folder)):
        return []
    sealed = layout.context_checkpoint
    if not (sealed.exists() or sealed.is_symlink()):
        return [f"context: {sealed.name} is missing, so {layout.context.name} (what the run was, and whether its "
                "evidence is complete) cannot be shown to be what the run's teardown wrote: the folder is refused "
                "whole" + (" (under the operator's key every folder must be sealed)" if operator else "")]
    try:
        unchanged, message = verify_checkpoint_file(layout.context, sealed, key_file, folder=True)
    except EvidenceError as exc:
        return [f"context: its seal cannot be checked: {exc}; the folder is refused whole"]
    if not unchanged:
        return [f"context: not the {layout.context.name} the run's teardown wrote: {message}; the folder is refused "
                "whole"]
    return []


def verdict_doubt(layout: EvidenceLayout, key_file: Path | None = None) -> str | None:
    """Why verdict.json cannot be shown as the run's own judgement, or None when its seal verifies (the run's key,
    or the operator's): ``harness report`` then judges the evidence again instead of printing it."""
    sealed = layout.verdict_checkpoint
    if not (sealed.exists() or sealed.is_symlink()):
        return f"{sealed.name} is missing"
    try:
        unchanged, message = verify_checkpoint_file(layout.verdict_json, sealed, key_file, folder=True)
    except EvidenceError as exc:
        return f"its seal cannot be checked: {exc}"
    return None if unchanged else f"not the {layout.verdict_json.name} the run wrote: {message}"


def evidence_gaps(layout: EvidenceLayout, context: dict[str, Any], journal: list[dict[str, Any]],
                  ledger_recovered_by: Any = None, key_file: Path | None = None,
                  late: Sequence[LateLines] = ()) -> list[str]:
    """What the harness lost of one run, each as "which source: why"; empty when the evidence is whole.
    An agent log that is no longer the one checkpointed at the end of the run is lost too: judging it
    would judge whoever changed it, not the agent. ``late``: ``lines_after_kill`` of the run's log.

    A folder whose context has no completeness mark at all was not written by a run of the harness
    (hand-built, or older): it is judged as it is, unless the operator's key is in use (then it is refused:
    ``context_seal_gaps`` said so first)."""
    mark = context.get(COMPLETENESS_KEY)
    if mark is None:
        return []
    gaps = []
    stopped_by = mark.get(INTERRUPTED_KEY) if isinstance(mark, dict) else None
    if stopped_by:
        gaps.append(f"the run was stopped before its end by {stopped_by}: the agent did not finish its work, so its "
                    "evidence is kept as far as it went and nothing was judged")
    elif not (isinstance(mark, dict) and mark.get(ContextKey.COMPLETE) is True):
        gaps.append("the run never marked its evidence complete: the harness stopped (killed, or crashed) "
                    "before its teardown had written every source")
    # a run stopped by a signal whose teardown still saved every source: what it saved is whole as far as it went
    if not (isinstance(mark, dict) and (mark.get(ContextKey.COMPLETE) is True or mark.get(ContextKey.SAVED) is True)):
        if not layout.ledger_dump.exists():
            gaps.append(f"effect ledger: {LEDGER_DUMP_FILE} is missing (the destinations' ground truth was "
                        "never copied into the folder)")
        elif ledger_recovered_by:
            gaps.append(f"effect ledger: saved by {ledger_recovered_by}; it holds what was committed "
                        "until then, and nothing was judged")
        if not layout.journal.exists():
            gaps.append(f"proxy journal: {layout.journal.name} is missing")
        else:
            gaps.append("proxy journal: a flow still in flight when the harness stopped may have no line")
    busy = mark.get(ContextKey.WRITES_IN_PROGRESS) if isinstance(mark, dict) else None
    for name, keys in (busy or {}).items():
        gaps.append(f"effect ledger: destination {name} was still processing {len(keys)} write(s) ({', '.join(keys)}) "
                    "when the run ended: whether and what they committed is not in the copied ledger")
    failed = mark.get(PROBE_FAILURES_KEY) if isinstance(mark, dict) else None
    for name, why in (failed or {}).items():
        gaps.append(f"effect ledger: destination {name} (a container service): {why}; what it committed is not "
                    "known, so nothing was judged")
    for problem in (mark.get(LEDGER_SEAL_KEY) if isinstance(mark, dict) else None) or ():
        gaps.append(f"effect ledger: not as the destinations wrote it: {problem}; the ground truth was changed "
                    "during the run, so nothing was judged on it")
    made = mark.get(CHECKPOINTS_KEY) if isinstance(mark, dict) else None
    # a folder from before the run kept the list: the checkpoints it holds, as they are; but under the operator's
    # key (which the folder's writer does not hold) the agent log's is required, whatever the context says
    signed_files = dict(made) if isinstance(made, dict) else {
        name: checkpoint for name, checkpoint in _CHECKPOINTED.items() if (layout.folder / checkpoint).exists()}
    if key_file is not None or os.environ.get(CHECKPOINT_KEY_FILE_ENV):
        signed_files.setdefault(AGENT_LOG_FILE, CHECKPOINT_FILE)
    for name, checkpoint_name in signed_files.items():
        what, which = _CHECKPOINT_NAMES.get(checkpoint_name, (name, "the file the harness checkpointed"))
        signed = layout.folder / checkpoint_name
        if not signed.exists():
            gaps.append(f"{what}: its signed checkpoint {checkpoint_name}, which the run made, is missing: whether "
                        f"{name} is the file the harness saw at the end of the run cannot be shown")
            continue
        try:
            unchanged, message = verify_checkpoint_file(layout.folder / name, signed, key_file, folder=True)
        except EvidenceError as exc:
            gaps.append(f"{what}: its checkpoint cannot be checked: {exc}")
        else:
            if not unchanged:
                gaps.append(f"{what}: not {which}: {message}")
    gaps += crash_survivors(late, layout.agent_log.name)
    for problem in (mark.get(TEARDOWN_PROBLEMS_KEY) if isinstance(mark, dict) else None) or ():
        gaps.append(f"the run's teardown: {problem}")
    for entry in journal:
        if entry.get("client_outcome") == IN_FLIGHT_AT_END and entry.get("forwarded") \
                and entry.get("upstream_status") is None:
            gaps.append(f"proxy journal line {entry.get('_line')}: flow {entry.get('flow_id')} "
                        f"({entry.get('method')} {entry.get('path')}) was still waiting for the destination "
                        f"when the run ended: whether and what it committed is unknown")
    return gaps


class LateLines(NamedTuple):
    """One killed run's session with lines in the log past the run's end."""
    run_index: int
    session: str
    line_numbers: list[int]
    confined: bool  # the run died whole with its kill (bubblewrap): a later process wrote them


def crash_survivors(late: Sequence[LateLines], log_name: str = AGENT_LOG_FILE) -> list[str]:
    """The planned crash, verified: each run the harness killed (``runs[*].killed_by_harness``) ended with
    the audit log ``log_bytes_at_end`` bytes long, once nothing of it was left running. A line past that
    carrying a ``session_id`` that run had written is proof the kill did not stop it (an agent that escaped
    its process group, a container that was not the agent's): the run is not the one the scenario set up, so
    it is lost, never judged. Each as "agent log: why"; empty when every kill held (or nothing says).

    Not a killed run that bubblewrap confined (``harness.sandbox.dies_with_its_kill``): nothing of it outlived the
    kill, so its session's later lines are a later process's, which reused its id (``reused_sessions``, H020)."""
    gaps = []
    for index, session, numbers, confined in late:
        if confined:
            continue
        span = f"line {numbers[0]}" if len(numbers) == 1 else f"lines {numbers[0]}-{numbers[-1]}"
        gaps.append(f"agent log: the planned crash did not stop the agent: session {session} (agent run "
                    f"{index + 1}, killed by the harness) wrote {len(numbers)} line(s) after the kill "
                    f"({log_name} {span}); this run is not the crash the scenario declares, so it is not "
                    "judged (a wrapper that starts the agent outside its process group, e.g. with setsid "
                    "or docker run, keeps it running when the harness kills the wrapper)")
    return gaps


def reused_sessions(late: Sequence[LateLines]) -> dict[str, dict[str, Any]]:
    """The sessions of killed runs bubblewrap confined that have lines after the kill: its PID namespace died with
    it, so those lines are a later process's that took the same ``session_id`` (a constant one). ``{session:
    {"agent_run": N, "lines": [line numbers]}}``, for H020; empty when none (or nothing says)."""
    return {session: {"agent_run": index + 1, "lines": numbers}
            for index, session, numbers, confined in late if confined}


def lines_after_kill(log: Path, agent: Any, bound: int = HARNESS_FILE_BYTES) -> list[LateLines]:
    """Each killed run's session that has lines past the run's end (``log_bytes_at_end``), as ``LateLines``.

    A line belongs to the run in whose stretch of the file it starts (the bytes between the end of the run
    before and its own end); a session first seen in an earlier run's stretch stays that run's."""
    runs = agent.get(ContextKey.RUNS) if isinstance(agent, dict) else None
    if not isinstance(runs, list):
        return []
    ends: list[tuple[int, bool, bool]] = []  # (log bytes at the run's end, killed by the harness, confined)
    for run in runs:
        if not isinstance(run, dict):
            return []
        size = run.get("log_bytes_at_end")
        if not isinstance(size, int) or isinstance(size, bool):
            return []  # an older folder, or one not measured: nothing to verify against
        sandbox = run.get("sandbox")
        ends.append((size, run.get("killed_by_harness") is True,
                     dies_with_its_kill(sandbox if isinstance(sandbox, str) else None)))
    if not any(killed for _, killed, _ in ends) or not log.is_file():
        return []
    try:
        lines = _sessions_by_offset(log, bound)
    except (OSError, UnsafeFile):  # a log not read is already a gap of its own (load_events)
        return []
    found: list[LateLines] = []
    owner: dict[str, int] = {}  # session -> the run whose stretch it first appears in
    start = 0
    for index, (end, killed, confined) in enumerate(ends):
        for offset, _number, session in lines:
            if start <= offset < end and session not in owner:
                owner[session] = index
        if killed:
            after: dict[str, list[int]] = {}
            for offset, number, session in lines:
                if offset >= end and owner.get(session) == index:
                    after.setdefault(session, []).append(number)
            found += [LateLines(index, session, numbers, confined) for session, numbers in after.items()]
        start = max(start, end)
    return found


def _sessions_by_offset(log: Path, bound: int) -> list[tuple[int, int, str]]:
    """``(byte offset, line number, session_id)`` of each line of ``log`` that names a session, numbered as
    ``load_events`` numbers them."""
    out = []
    offset = 0
    # newline="": lines split as the reader splits them (\n, \r\n, \r), their breaks kept to count bytes
    with io.TextIOWrapper(open_regular(log, bound), encoding="utf-8", errors="surrogateescape",
                          newline="") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if text.startswith("{") and '"session_id"' in text:
                try:
                    value = json.loads(text)
                except ValueError:
                    value = None
                session = value.get("session_id") if isinstance(value, dict) else None
                if isinstance(session, str) and session:
                    out.append((offset, number, session))
            offset += len(raw.encode("utf-8", "surrogateescape"))
    return out


def _check_contracts(path: Path, destinations: dict[str, Any]) -> None:
    """Each destination's contract must read as a ``DestinationContract`` (the checker reads it so)."""
    for name, entry in destinations.items():
        contract = entry.get("contract") if isinstance(entry, dict) else None
        if contract is None:
            continue
        try:
            DestinationContract.from_dict(contract)
        except ContractError as exc:
            raise EvidenceError(f"{path}: destinations.{name}.contract: {exc}") from None
