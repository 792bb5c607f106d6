"""The investigation report as HTML: one section per operation, generated from the verdict and the evidence records.

``write_html_report(path, verdict, run=RunInfo(...), evidence=...)`` writes a self-contained page (inline CSS,
a little inline JavaScript as an enhancement only, no CDN; readable with JavaScript off); every failing
scenario run gets one in its evidence folder (``REPORT_HTML``), and ``python -m harness report DIR --html FILE``
and ``python -m harness audit LOG --html FILE`` write one on demand. The page is built from data: the
``Verdict`` (``harness.results.verdict``) and, when there is one, the ``Evidence`` (log events with ``_line``,
journal entries with ``_line``, ledger effects and requests with ``seq``), never from the text report.
Escaping is markupsafe's, Jinja2's own: the pages' frames are autoescaped templates
(``harness/templates/report/``); the operation sections and their evidence records, most of a page, are built
here with f-strings (a Jinja macro and its ``{{ }}`` cost several times as much), every text from the evidence
or the verdict through ``markupsafe.escape``, after ``harness.visible`` (control, bidirectional and zero-width
characters shown as escapes, as the text report shows them). Nothing escapes by hand.

Page structure (stable: the browser tests rely on it)
-----------------------------------------------------
``DOM`` below is ``dom_id(operation_id)``: the id itself when it holds only ``A-Z a-z 0-9 _ . : -``, else
every other character as ``~XXXX`` (its code point in hex), ``~`` included.

- ``section#summary``: the run: ``.scenario``, ``.agent``, ``.mode``, ``#verdict[data-verdict]`` (PASSED,
  FAILED or INCOMPLETE) with ``ul.why`` (why incomplete or failed), ``table#findings-by-rule`` with
  ``tr.rule[data-code]`` whose ``a.filter[data-filter=rule][data-value=CODE]`` opens the filtered index,
  ``.evidence-folder``; ``details#run-checks`` (closed; its summary counts the checks failed, held and not
  exercised) holding ``table#checks``.
- ``section#index``: ``table#operations`` of ``tr.operation[data-operation-id][data-classification]
  [data-state][data-codes]`` (codes space-separated, sorted), whose first cell holds ``a.op-link`` to
  the operation's section. Filters that work without JavaScript: ``a.filter[data-filter=classification|rule]
  [data-value]``, each to a pre-rendered filtered index (``section.filtered-index#index-classification-C`` /
  ``#index-rule-CODE`` shown by CSS ``:target`` in a one-file report; files ``STEM-classification-C-0001.html``
  / ``STEM-rule-CODE-0001.html`` in a paged one). With JavaScript, ``select#filter-classification`` and
  ``select#filter-rule`` (hidden without it) filter ``table#operations`` in place.
- ``section.operation#op-DOM[data-operation-id][data-classification][data-state][data-codes]``, in order:
  ``.intent``; ``.state`` and ``.classification``; ``p.timeline-legend`` (``span.legend[data-lane]``, one per
  lane, with its dot) and ``table.timeline`` (one time axis: ``tr.step`` rows, one per correlated group, with
  ``td.axis`` of ``.dot.dot-LANE``, ``td.lane-log``, ``td.lane-flow``, ``td.lane-effect``;
  ``tr.gap[data-seconds]`` between attempts); ``.findings`` of ``.finding#op-DOM-finding-K[data-code]``
  (K from 1), each ``a.cites`` to an evidence row; ``table.attempts`` of ``tr.attempt#op-DOM-attempt-K``
  (``tr.fork`` where the payload changed, ``a.retry-parent`` to the parent attempt);
  ``table.observations`` of ``tr.observation``; evidence rows ``.evidence#op-DOM-log-N`` (log line N),
  ``#op-DOM-flow-N`` (journal line N), ``#op-DOM-request-N`` (ledger request seq N, a destination the proxy
  does not front), ``#op-DOM-effect-N`` (ledger effect seq N), each with ``a.cited-by[data-code]`` back to the findings
  citing it; ``.links`` of ``a.op-ref[data-relation]`` (supersedes, superseded-by, correction,
  correction-of, parent, child); last ``.outcome``.
- ``section#run-findings``: ``.finding#run-finding-K[data-code]``, findings of no operation shown, with
  their evidence rows ``#run-log-N`` ... when no operation's section holds them.
- Black-box verdicts: ``section.operation.intent#intent-DOM`` the same way (``#intent-DOM-flow-N`` ...).

Order: ``#summary``, ``#index``, ``#run-findings``, ``#unattributed``, ``#operations-detail``; a page of at most
``SECTIONS_FIRST_LIMIT`` operations puts ``#operations-detail`` right after ``#summary``, so that its timelines
are on the first screen.

Large runs (more than ``ONE_FILE_LIMIT`` operations) are paged: ``report.html`` holds the summary, the
first index page and the list of pages; ``STEM-index-0001.html``... the index, ``STEM-ops-0001.html``...
``PAGE_SIZE`` operation sections each, every link between them naming the page.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import markupsafe

from harness.checker.readings import ts_value
from harness.limits import collector_paused
from harness.results.verdict import EFFECTS_SAID
from harness.safe_files import write_file
from harness.visible import printable, printable_but_nul

if TYPE_CHECKING:
    import jinja2

    from harness.evidence import Evidence
    from harness.results.scenario_result import ScenarioResult
    from harness.results.verdict import Finding, IntentVerdict, OperationVerdict, Verdict

REPORT_HTML = "report.html"  # what every failing run writes into its evidence folder
ONE_FILE_LIMIT = 1000  # up to this many operations, one file; above, paged
PAGE_SIZE = 250  # operation sections per page file
INDEX_PAGE_SIZE = 1000  # index rows per index page (the main file holds the first)
# up to this many operations (a scenario run's few), the page opens on their sections, right below the summary,
# each with its timeline first; the index, a table of contents of a longer page, and the run-wide findings follow
SECTIONS_FIRST_LIMIT = 3

_MUTED_DASH = markupsafe.Markup('<span class="muted">-</span>')
_SAFE_ID = re.compile(r"[A-Za-z0-9_.:-]+")


def dom_id(value: str) -> str:
    """An operation id as an HTML id (and a URL fragment): unchanged when plain, else each unsafe character as
    ``~XXXX``. Injective: ``~`` itself is escaped."""
    if _SAFE_ID.fullmatch(value):
        return value
    return "".join(ch if _SAFE_ID.fullmatch(ch) else f"~{ord(ch):04x}" for ch in value)


@dataclass
class RunInfo:
    """What the report says about the run beside its verdict."""

    scenario: str | None = None
    agent: str | None = None
    evidence_dir: str | None = None
    incomplete: list[str] = field(default_factory=list)
    title: str | None = None  # default: from the scenario, else the log
    source: str = "run"  # "run" (an evidence folder) or "audit" (a log judged offline)


@dataclass
class _Row:
    """One evidence record on the timeline."""

    kind: str  # log | flow | request | effect
    n: int
    ts: float | None
    title: str
    summary: list[tuple[str, Any]]
    fields: list[tuple[str, Any]]
    dom: str = ""
    cited_by: list[tuple[str, str]] = field(default_factory=list)  # (href, code)
    note: str | None = None
    end: float | None = None


_Sources = dict[tuple[str, int], Callable[[], _Row]]  # a section's records: (kind, number) -> how its row is made


def _ref_key(ref: dict[str, Any]) -> tuple[str, int] | None:
    """A finding's evidence pointer as (row kind, number), or None when it points at no record row."""
    source = ref.get("source")
    if source == "log":
        n = ref.get("line")
        kind = "log"
    elif source == "journal":
        n, kind = ref.get("line"), "flow"
    elif source == "ledger":
        n = ref.get("seq")
        kind = "request" if ref.get("table") == "requests" else "effect" if ref.get("table") == "effects" else ""
    else:
        return None
    if not kind or not isinstance(n, int) or isinstance(n, bool):
        return None
    return kind, n


def _ref_text(ref: dict[str, Any]) -> str:
    source = ref.get("source")
    if source == "log":
        bits = [ref.get("event"), ref.get("attempt_id") or ref.get("observation_id") or ref.get("approval_id"),
                ref.get("dispatch_state") or ref.get("state")]
        return f"log line {ref.get('line')}: " + " ".join(str(b) for b in bits if b)
    if source == "journal":
        return (f"journal line {ref.get('line')}: flow {ref.get('flow_id')} {ref.get('method')} {ref.get('path')} "
                f"upstream {ref.get('upstream_status')}, client {ref.get('client_outcome')}")
    if source == "ledger" and ref.get("table") == "effects":
        return f"ledger effect seq {ref.get('seq')}: {ref.get('effect_ref')} on {ref.get('destination')}"
    if source == "ledger":
        return f"ledger {ref.get('table')} seq {ref.get('seq')}: {ref.get('method')} {ref.get('path')}"
    return ", ".join(f"{k}={v}" for k, v in ref.items())


def _short(value: Any, width: int = 18) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


class _Records:
    """The evidence records, indexed: what the rows are made of. Empty without evidence (a verdict alone)."""

    def __init__(self, evidence: Evidence | None) -> None:
        self.evidence = evidence
        self.by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.log: dict[int, dict[str, Any]] = {}
        self.journal: dict[int, dict[str, Any]] = {}
        self.effects: dict[int, dict[str, Any]] = {}
        self.effects_by_ref: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.requests: dict[int, dict[str, Any]] = {}
        self.requests_by_flow: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.observed: dict[str, dict[str, dict[str, Any]]] = {}  # operation -> observation id -> its read
        self.relations: dict[str, list[tuple[str, str]]] = defaultdict(list)  # operation -> (relation, other)
        if evidence is None:
            return
        for event in evidence.events:
            if isinstance(event.get("operation_id"), str):
                self.by_op[event["operation_id"]].append(event)
            if isinstance(event.get("_line"), int):
                self.log[event["_line"]] = event
        for entry in evidence.journal:
            if isinstance(entry.get("_line"), int):
                self.journal[entry["_line"]] = entry
        for row in evidence.effects:
            if isinstance(row.get("seq"), int):
                self.effects[row["seq"]] = row
            if row.get("effect_ref"):
                self.effects_by_ref[str(row["effect_ref"])].append(row)
        for row in evidence.requests:
            if isinstance(row.get("seq"), int):
                self.requests[row["seq"]] = row
            if row.get("flow_id"):
                self.requests_by_flow[str(row["flow_id"])].append(row)
        for event in evidence.events:
            if event.get("event") != "operation":
                continue
            me = event["operation_id"]
            intent: dict[str, Any] = event["intent"] if isinstance(event.get("intent"), dict) else {}
            for key, relation, back in (("supersedes_operation_id", "supersedes", "superseded-by"),
                                        ("correction_of_operation_id", "correction-of", "correction"),
                                        ("parent_operation_id", "parent", "child")):
                other = event.get(key)
                if isinstance(other, str) and other and other != me:
                    self._relate(me, relation, other)
                    self._relate(other, back, me)
            if isinstance(intent.get("supersedes"), str) and intent["supersedes"]:
                self._relate(me, "supersedes intent", intent["supersedes"])

    def _relate(self, op: str, relation: str, other: str) -> None:
        if (relation, other) not in self.relations[op]:
            self.relations[op].append((relation, other))

    def correlate_observations(self) -> None:
        """Which journal flow carried each observation's read: the checker's own correlation, run again
        (the verdict keeps the attempts' flows, not the reads')."""
        evidence = self.evidence
        if evidence is None or not evidence.journal:
            return
        from harness.checker import correlation_of

        try:
            observed = correlation_of(evidence).observed
        except (KeyError, TypeError, ValueError):  # evidence the checker judged some other way: no reads shown
            return
        for op_id, reads in observed.items():
            if reads:
                self.observed[op_id] = dict(reads)


def _log_row(event: dict[str, Any]) -> _Row:
    kind = event.get("event") or event.get("type") or "?"
    ident = event.get("attempt_id") or event.get("observation_id") or event.get("approval_id")
    title = f"{kind} {ident}" if ident else str(kind)
    summary: list[tuple[str, Any]] = []
    for key in ("dispatch_state", "state", "http_status", "found", "effect_refs", "idempotency_key",
                "retry_of_attempt_id", "retry_reason", "reason", "error", "decision", "scope"):
        if event.get(key) not in (None, "", []):
            summary.append((key, event[key]))
    fields = [(k, v) for k, v in event.items() if not k.startswith("_")]
    return _Row("log", int(event["_line"]), ts_value(event.get("ts")) or None, title, summary, fields)


def _flow_row(entry: dict[str, Any], n: int) -> _Row:
    fault = entry.get("fault")
    summary: list[tuple[str, Any]] = [("flow", entry.get("flow_id")), ("fault", fault or "none"),
                                      ("forwarded", entry.get("forwarded")),
                                      ("upstream", entry.get("upstream_status")),
                                      ("client", entry.get("client_outcome")),
                                      ("client status", entry.get("client_status")),
                                      ("key", entry.get("idempotency_key"))]
    fields = [(k, v) for k, v in entry.items() if not k.startswith("_") and k != "headers"]
    start, end = entry.get("ts_request"), entry.get("ts_done")
    title = f"{entry.get('method')} {entry.get('path')} to {entry.get('destination')}"
    return _Row("flow", n, ts_value(start) or None, title, summary, fields,
                end=ts_value(end) or None)


def _request_row(row: dict[str, Any]) -> _Row:
    summary: list[tuple[str, Any]] = [("status", row.get("status")), ("outcome", row.get("outcome")),
                                      ("effect", row.get("effect_ref")), ("key", row.get("idempotency_key"))]
    title = f"{row.get('method')} {row.get('path')} received by {row.get('destination')} (not proxied)"
    return _Row("request", int(row["seq"]), ts_value(row.get("received_at")) or None, title, summary,
                [(k, v) for k, v in row.items()])


def _effect_row(row: dict[str, Any]) -> _Row:
    summary: list[tuple[str, Any]] = [("effect", row.get("effect_ref")), ("kind", row.get("kind")),
                                      ("key", row.get("operation_key")), ("flow", row.get("flow_id")),
                                      ("replay", bool(row.get("replay")))]
    title = f"effect {row.get('effect_ref')} committed on {row.get('destination')}"
    return _Row("effect", int(row["seq"]), ts_value(row.get("committed_at")) or None, title, summary,
                [(k, v) for k, v in row.items()])


def _wire_summary_row(wire: dict[str, Any]) -> _Row:
    """A flow known only from the verdict (no journal at hand): what the verdict kept of it."""
    entry = {k: v for k, v in wire.items() if k not in ("line", "source")}
    return _flow_row(entry, int(wire["line"]))


def _verdict_log_row(line: int, title: str, summary: list[tuple[str, Any]]) -> _Row:
    return _Row("log", line, None, title, summary, [])


class _Builder:
    """Per-operation views, for the templates."""

    def __init__(self, verdict: Verdict, records: _Records, *, paged: bool, stem: str) -> None:
        self.verdict = verdict
        self.records = records
        self.paged = paged
        self.stem = stem
        self.black_box = verdict.black_box
        subjects: list[str] = ([i.intent_id for i in verdict.intents] if self.black_box
                               else [o.operation_id for o in verdict.operations])
        self.prefix = "intent" if self.black_box else "op"
        self.page_of = {s: i // PAGE_SIZE + 1 for i, s in enumerate(subjects)}
        self.pages = (len(subjects) + PAGE_SIZE - 1) // PAGE_SIZE
        self.owner: dict[tuple[str, int], str] = {}  # evidence row -> the subject whose section holds it
        for subject, keys in self._all_row_keys():
            for key in keys:
                self.owner.setdefault(key, subject)

    # -- where things are
    def ops_page(self, page: int) -> str:
        return f"{self.stem}-ops-{page:04d}.html"

    def section_id(self, subject: str) -> str:
        return f"{self.prefix}-{dom_id(subject)}"

    def href(self, subject: str, anchor: str, here: int | None) -> str:
        """The link to an element of ``subject``'s section, from page ``here`` (None: the main file)."""
        if not self.paged:
            return f"#{anchor}"
        page = self.page_of[subject]
        return f"#{anchor}" if page == here else f"{self.ops_page(page)}#{anchor}"

    def op_href(self, subject: str, here: int | None) -> str | None:
        if subject not in self.page_of:
            return None
        return self.href(subject, self.section_id(subject), here)

    # -- the rows an operation's section holds of its own: first their keys, (kind, number), each with how its
    # row is made (the owner of every record is known before any section is built, from the keys alone)
    def _all_row_keys(self) -> Iterator[tuple[str, Iterable[tuple[str, int]]]]:
        if self.black_box:
            for intent in self.verdict.intents:
                yield intent.intent_id, self._intent_sources(intent).keys()
        else:
            for op in self.verdict.operations:
                yield op.operation_id, self._op_sources(op).keys()

    def _effect_sources(self, refs: Iterable[str], into: _Sources) -> None:
        for ref in refs:
            for row in self.records.effects_by_ref.get(ref, []):
                into.setdefault(("effect", int(row["seq"])), partial(_effect_row, row))

    def _wire_sources(self, wire: dict[str, Any] | None, into: _Sources) -> None:
        if not wire:
            return
        rec = self.records
        if wire.get("source") == "ledger":
            seq = str(wire.get("flow_id", "")).split(":")[-1]
            row = rec.requests.get(int(seq)) if seq.isdigit() else None
            if row:
                into.setdefault(("request", int(row["seq"])), partial(_request_row, row))
            return
        line = wire.get("line")
        if isinstance(line, int):
            entry = rec.journal.get(line)
            into.setdefault(("flow", line), partial(_flow_row, entry, line) if entry is not None
                            else partial(_wire_summary_row, wire))

    def _wire_rows(self, wire: dict[str, Any] | None) -> list[tuple[str, int]]:
        """The keys of an attempt's flow rows."""
        found: _Sources = {}
        self._wire_sources(wire, found)
        return list(found)

    def _op_sources(self, op: OperationVerdict) -> _Sources:
        rec = self.records
        into: _Sources = {}
        events = rec.by_op.get(op.operation_id)
        if events:
            for e in events:
                if isinstance(e.get("_line"), int):
                    into.setdefault(("log", e["_line"]), partial(_log_row, e))
        else:  # a verdict alone: the lines it names
            for a in op.attempts:
                if a.line is not None:
                    into.setdefault(("log", a.line), partial(
                        _verdict_log_row, a.line, f"attempt {a.attempt_id}",
                        [("dispatch_state", a.dispatch_state), ("idempotency_key", a.key)]))
            for o in op.observations:
                if isinstance(o.get("line"), int):
                    into.setdefault(("log", o["line"]), partial(
                        _verdict_log_row, o["line"], f"observation {o.get('observation_id')}",
                        [("found", o.get("found")), ("effect_refs", o.get("effect_refs"))]))
            if op.resolution and isinstance(op.resolution.get("line"), int):
                into.setdefault(("log", op.resolution["line"]), partial(
                    _verdict_log_row, op.resolution["line"], "resolution", [("state", op.resolution.get("state"))]))
        for a in op.attempts:
            self._wire_sources(a.wire, into)
        for entry in rec.observed.get(op.operation_id, {}).values():
            if isinstance(entry.get("_line"), int):
                into.setdefault(("flow", entry["_line"]), partial(_flow_row, entry, entry["_line"]))
        self._effect_sources(op.effects, into)
        return into

    def _intent_sources(self, intent: IntentVerdict) -> _Sources:
        into: _Sources = {}
        for attempt in intent.attempts:
            self._wire_sources(attempt, into)
        self._effect_sources(intent.effects, into)
        return into

    @staticmethod
    def _rows(sources: _Sources) -> dict[tuple[str, int], _Row]:
        return {key: make() for key, make in sources.items()}

    def _record_row(self, key: tuple[str, int]) -> _Row | None:
        kind, n = key
        rec = self.records
        if kind == "log" and n in rec.log:
            return _log_row(rec.log[n])
        if kind == "flow" and n in rec.journal:
            return _flow_row(rec.journal[n], n)
        if kind == "request" and n in rec.requests:
            return _request_row(rec.requests[n])
        if kind == "effect" and n in rec.effects:
            return _effect_row(rec.effects[n])
        return None

    # -- findings and their evidence, linked both ways
    def _cites(self, findings: list[Finding], anchor: str, rows: dict[tuple[str, int], _Row],
               subject: str | None, here: int | None, extra: list[_Row]) -> list[dict[str, Any]]:
        """Each finding with its citations as (text, href); the rows it cites learn who cites them. A cited
        record no section holds (a flow no attempt explains) is added to ``rows`` (and ``extra``)."""
        out = []
        for k, finding in enumerate(findings, start=1):
            fid = f"{anchor}-finding-{k}"
            cites = []
            for ref in finding.evidence:
                key = _ref_key(ref)
                href = None
                if key is not None:
                    if key not in rows and self.owner.get(key) is None:
                        row = self._record_row(key)
                        if row is not None:
                            row.note = "cited evidence no operation's section holds"
                            row.dom = f"{anchor}-{key[0]}-{key[1]}"
                            rows[key] = row
                            extra.append(row)
                    if key in rows:
                        href = f"#{rows[key].dom}"
                        own_href = f"#{fid}"
                        if (own_href, finding.code) not in rows[key].cited_by:
                            rows[key].cited_by.append((own_href, finding.code))
                    elif self.owner.get(key) is not None:
                        other = self.owner[key]
                        href = self.href(other, f"{self.section_id(other)}-{key[0]}-{key[1]}", here)
                cites.append({"text": _ref_text(ref), "href": href})
            out.append({"id": fid, "code": finding.code, "rule": finding.rule, "message": finding.message,
                        "cites": cites})
        return out

    # -- one operation's section
    def operation(self, op: OperationVerdict, here: int | None) -> dict[str, Any]:
        sid = self.section_id(op.operation_id)
        rows = self._rows(self._op_sources(op))
        for (kind, n), row in rows.items():
            row.dom = f"{sid}-{kind}-{n}"
        extra: list[_Row] = []
        findings = self._cites(op.findings, sid, rows, op.operation_id, here, extra)
        events = self.records.by_op.get(op.operation_id, [])
        log_attempts: dict[Any, dict[str, Any]] = {}
        for event in events:
            if event.get("event") == "attempt":
                log_attempts.setdefault(event.get("attempt_id"), {}).update(
                    {k: v for k, v in event.items() if v is not None})
        approvals = [e for e in events if e.get("event") == "approval"]
        attempts, groups = [], []
        number_of = {a.attempt_id: k for k, a in enumerate(op.attempts, start=1)}
        previous_fp: str | None = None
        previous_end: float | None = None
        keys_seen: dict[str, int] = {}
        claimed: set[tuple[str, int]] = set()
        for k, a in enumerate(op.attempts, start=1):
            logged = log_attempts.get(a.attempt_id, {})
            wire = a.wire or {}
            flow_rows = [rows[key] for key in self._wire_rows(a.wire) if key in rows]
            flow = flow_rows[0] if flow_rows else None
            fp = logged.get("request_fingerprint") or wire.get("body_fingerprint")
            fork = previous_fp is not None and fp is not None and fp != previous_fp
            fork_from = previous_fp if fork else None
            if fp is not None:
                previous_fp = fp
            key = a.key or wire.get("idempotency_key")
            same_key_as = keys_seen.get(key) if key else None
            if key and key not in keys_seen:
                keys_seen[key] = k
            authority = [ap.get("approval_id") for ap in approvals
                         if a.retry_of_attempt_id and ap.get("retry_of_attempt_id") == a.retry_of_attempt_id
                         or ap.get("scope") == "session"]
            duration = (flow.end - flow.ts) if flow and flow.end and flow.ts else None
            response = _response_text(a.dispatch_state, logged, wire, a.destination_saw)
            attempts.append({
                "id": f"{sid}-attempt-{k}", "number": logged.get("attempt_number") or k, "attempt_id": a.attempt_id,
                "dispatch_state": a.dispatch_state,
                "retry_of": a.retry_of_attempt_id,
                "retry_href": f"#{sid}-attempt-{number_of[a.retry_of_attempt_id]}"
                if a.retry_of_attempt_id in number_of else None,
                "reason": a.retry_reason, "decision": logged.get("retry_decision"),
                "authority": [x for x in authority if x], "key": key, "same_key_as": same_key_as,
                "destination": " ".join(str(x) for x in (logged.get("method"), logged.get("path"), "on",
                                                          logged.get("destination")) if x) or None,
                "fingerprint": fp, "fork": fork, "fork_from": fork_from, "response": response,
                "duration": _seconds(duration) if duration is not None else "-",
                "log_href": f"#{sid}-log-{a.line}" if ("log", a.line or -1) in rows else None,
                "flow_href": f"#{flow.dom}" if flow else None,
            })
            # the timeline group: the attempt's log line(s), its flow, what the destination did with it
            members: list[_Row] = [r for r in rows.values() if r.kind == "log" and r.n in _attempt_lines(a, logged)]
            members += flow_rows
            flow_id = wire.get("flow_id")
            members += [r for r in rows.values() if r.kind == "effect" and flow_id and
                        dict(r.summary).get("flow") == flow_id]
            members = [m for m in members if (m.kind, m.n) not in claimed]
            claimed.update((m.kind, m.n) for m in members)
            start = min((m.ts for m in members if m.ts), default=None)
            end = max((t for m in members for t in (m.end or m.ts,) if t), default=None)
            gap = (start - previous_end) if start is not None and previous_end is not None else None
            groups.append({"kind": "attempt", "label": f"attempt {k}", "members": members, "start": start,
                           "gap": gap, "fork": fork})
            if end is not None:
                previous_end = end
        observations = []
        cited_by_resolution = set((op.resolution or {}).get("evidence") or [])
        for o in op.observations:
            oid = o.get("observation_id")
            read = self.records.observed.get(op.operation_id, {}).get(oid or "")
            logged = next((e for e in events if e.get("event") == "observation" and e.get("observation_id") == oid), {})
            checked = " ".join(str(x) for x in (o.get("source"), logged.get("method"), logged.get("path")) if x)
            if oid in cited_by_resolution:
                why = f"the resolution cites it: the operation was closed {op.state} on it"
            elif o.get("found") is False and o.get("lag_possible") is not False:
                why = "not found, but the lookup may lag: no proof of absence, the state did not change on it"
            else:
                why = "the resolution does not cite it: the state did not change on it"
            members = [r for r in rows.values() if r.kind == "log" and r.n == o.get("line")]
            if read is not None and ("flow", read.get("_line") or -1) in rows:
                members.append(rows[("flow", read["_line"])])
            members = [m for m in members if (m.kind, m.n) not in claimed]
            claimed.update((m.kind, m.n) for m in members)
            observations.append({"id": oid, "checked": checked or "-", "found": o.get("found"),
                                 "effect_refs": o.get("effect_refs") or [], "lag": o.get("lag_possible"),
                                 "why": why, "log_href": f"#{sid}-log-{o.get('line')}"
                                 if ("log", o.get("line") or -1) in rows else None})
            groups.append({"kind": "observation", "label": f"observation {oid}", "members": members,
                           "start": min((m.ts for m in members if m.ts), default=None), "gap": None, "fork": False})
        for row in list(rows.values()):
            if (row.kind, row.n) not in claimed:
                groups.append({"kind": row.kind, "label": row.title if row.kind == "log" else row.kind,
                               "members": [row], "start": row.ts, "gap": None, "fork": False})
        timeline = _timeline(groups)
        effects = [rows[("effect", r.n)] for r in rows.values() if r.kind == "effect"]
        links = []
        for relation, other in self.records.relations.get(op.operation_id, []):
            links.append({"relation": relation, "target": other, "href": self.op_href(other, here)})
        resolution = op.resolution or {}
        correction = resolution.get("correction_operation_id")
        if correction and ("correction", correction) not in self.records.relations.get(op.operation_id, []):
            links.append({"relation": "correction", "target": correction, "href": self.op_href(correction, here)})
        evidence_links = []
        for ident in resolution.get("evidence") or []:
            href = None
            if ident in number_of:
                href = f"#{sid}-attempt-{number_of[ident]}"
            evidence_links.append({"text": ident, "href": href})
        # a log may tell of an operation without its operation line (no intent): the page says "?"
        intent = {"kind": None, "destination": None, **(op.intent or {})}
        return {
            "id": sid, "operation_id": op.operation_id, "intent_id": op.intent_id, "intent": intent,
            "params": _flat(intent.get("params")), "classification": op.classification, "state": op.state,
            "codes": " ".join(sorted({f.code for f in op.findings})), "findings": findings, "attempts": attempts,
            "observations": observations, "timeline": timeline, "links": links, "resolution": resolution,
            "resolution_evidence": evidence_links, "effects": op.effects, "effect_rows": effects,
            "duplicate": len(op.effects) > 1, "held": op.held, "not_exercised": op.not_exercised, "black_box": False,
        }

    def intent(self, intent: IntentVerdict, here: int | None) -> dict[str, Any]:
        """A black-box intent: its writes on the wire and its effects, as an operation's section shows them."""
        sid = self.section_id(intent.intent_id)
        rows = self._rows(self._intent_sources(intent))
        for (kind, n), row in rows.items():
            row.dom = f"{sid}-{kind}-{n}"
        findings = self._cites(intent.findings, sid, rows, intent.intent_id, here, [])
        attempts: list[dict[str, Any]] = []
        groups: list[dict[str, Any]] = []
        claimed: set[tuple[str, int]] = set()
        previous_end: float | None = None
        keys_seen: dict[str, int] = {}
        previous_fp: str | None = None
        for k, a in enumerate(intent.attempts, start=1):
            flow_rows = [rows[key] for key in self._wire_rows(a) if key in rows]
            flow = flow_rows[0] if flow_rows else None
            key = a.get("idempotency_key")
            fp = a.get("body_fingerprint")
            fork = previous_fp is not None and fp is not None and fp != previous_fp
            attempts.append({
                "id": f"{sid}-attempt-{k}", "number": k, "attempt_id": a.get("flow_id"), "dispatch_state": None,
                "retry_of": None, "retry_href": None, "reason": None, "decision": a.get("attributed_by"),
                "authority": [], "key": key, "same_key_as": keys_seen.get(key) if key else None,
                "destination": f"{a.get('method')} {a.get('path')}", "fingerprint": fp, "fork": fork,
                "fork_from": previous_fp if fork else None,
                "response": _response_text(None, {}, a, a.get("destination_saw") or []),
                "duration": _seconds(ts_value(a.get("ts_done")) - ts_value(a.get("ts_request")))
                if a.get("ts_done") and a.get("ts_request") else "-",
                "log_href": None, "flow_href": f"#{flow.dom}" if flow else None})
            if key and key not in keys_seen:
                keys_seen[key] = k
            if fp is not None:
                previous_fp = fp
            members = list(flow_rows) + [r for r in rows.values() if r.kind == "effect" and a.get("flow_id")
                                         and dict(r.summary).get("flow") == a.get("flow_id")]
            members = [m for m in members if (m.kind, m.n) not in claimed]
            claimed.update((m.kind, m.n) for m in members)
            start = min((m.ts for m in members if m.ts), default=None)
            gap = (start - previous_end) if start is not None and previous_end is not None else None
            end = max((t for m in members for t in (m.end or m.ts,) if t), default=None)
            if end is not None:
                previous_end = end
            groups.append({"kind": "attempt", "label": f"write {k}", "members": members, "start": start,
                           "gap": gap, "fork": fork})
        for row in rows.values():
            if (row.kind, row.n) not in claimed:
                groups.append({"kind": row.kind, "label": row.kind, "members": [row], "start": row.ts,
                               "gap": None, "fork": False})
        what = intent.intent or {}
        return {
            "id": sid, "operation_id": intent.intent_id, "intent_id": intent.intent_id, "intent": what,
            "params": _flat(what.get("params")), "classification": intent.classification, "state": None,
            "codes": " ".join(sorted({f.code for f in intent.findings})), "findings": findings,
            "attempts": attempts, "observations": [], "timeline": _timeline(groups), "links": [],
            "resolution": {}, "resolution_evidence": [], "effects": intent.effects,
            "effect_rows": [r for r in rows.values() if r.kind == "effect"], "duplicate": len(intent.effects) > 1,
            "held": intent.held, "not_exercised": intent.not_exercised, "black_box": True,
            "key_behaviour": intent.key_behaviour,
        }

    def run_findings(self, here: int | None) -> tuple[list[dict[str, Any]], list[_Row]]:
        """The findings no section shows (run-wide, or of an operation the verdict does not hold)."""
        shown = set(self.page_of)
        loose = [f for f in self.verdict.findings
                 if (f.intent_id if self.black_box else f.operation_id) not in shown]
        rows: dict[tuple[str, int], _Row] = {}
        extra: list[_Row] = []
        findings = self._cites(loose, "run", rows, None, here, extra)
        return findings, extra


def _attempt_lines(a: Any, logged: dict[str, Any]) -> set[int]:
    lines = {a.line} if a.line is not None else set()
    lines.update(x for x in logged.get("_lines") or [] if isinstance(x, int))
    return lines


def _flat(params: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if not isinstance(params, dict):
        return [] if params is None else [(prefix or "params", params)]
    out: list[tuple[str, Any]] = []
    for key, value in params.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out += _flat(value, name) if isinstance(value, dict) else [(name, value)]
    return out


def _response_text(dispatch: str | None, logged: dict[str, Any], wire: dict[str, Any],
                   saw: list[dict[str, Any]]) -> str:
    parts = []
    if logged.get("http_status") is not None:
        parts.append(f"agent got {logged['http_status']}")
    elif dispatch == "sent_no_response":
        parts.append("agent got no answer")
    if wire:
        if wire.get("client_outcome") == "response":
            parts.append(f"client saw {wire.get('client_status')}")
        elif wire.get("client_outcome"):
            parts.append(f"client saw {wire.get('client_outcome')}")
        if wire.get("upstream_status") is not None:
            parts.append(f"upstream {wire.get('upstream_status')}")
        if wire.get("fault"):
            parts.append(f"fault {wire.get('fault')}")
    for row in saw:
        parts.append(f"destination {row.get('status')} {row.get('outcome')}"
                     + (f" {row.get('effect_ref')}" if row.get("effect_ref") else ""))
    if logged.get("error"):
        parts.append(f"error: {logged['error']}")
    return "; ".join(parts) or "-"


def _timeline(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The groups on one time axis: sorted by when they started (untimed ones by log line), each member
    with its offset from the first record and its position on the axis (percent)."""
    def order(group: dict[str, Any]) -> tuple[float, int]:
        lines = [m.n for m in group["members"] if m.kind == "log"]
        start = group["start"]
        return (start if start is not None else float("inf"), min(lines, default=0))

    groups = [g for g in groups if g["members"]]
    groups.sort(key=order)
    times = [t for g in groups for m in g["members"] for t in (m.ts, m.end) if t]
    t0 = min(times, default=None)
    span = (max(times) - t0) if t0 is not None and len(times) > 1 else 0.0
    steps = []
    for group in groups:
        lanes: dict[str, list[dict[str, Any]]] = {lane: [] for lane in _LANES}
        for m in sorted(group["members"], key=lambda m: (m.ts or 0.0, m.n)):
            offset = (m.ts - t0) if m.ts is not None and t0 is not None else None
            pos = round(100 * offset / span, 1) if offset is not None and span > 0 else 0.0
            lanes["flow" if m.kind == "request" else m.kind].append(
                {"row": m, "offset": f"+{offset:.3f} s" if offset is not None else "untimed", "pos": pos})
        gap = group["gap"]
        # spacing: a gap row tall in proportion to its share of the axis (4..80 px), labelled in seconds
        height = max(4, min(80, round(80 * gap / span))) if gap is not None and gap > 0 and span > 0 else 4
        steps.append({"label": group["label"], "kind": group["kind"], "lanes": lanes, "gap": gap,
                      "gap_text": _seconds(gap) if gap is not None else None, "gap_height": height,
                      "fork": group["fork"]})
    return {"steps": steps, "span": _seconds(span) if t0 is not None else None}


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("harness", "templates/report"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined, finalize=_visible)
    env.filters["evidence_html"] = _evidence_html
    env.filters["section_html"] = _section_html
    env.filters["finding_html"] = _finding_html
    return env


def _visible(value: Any) -> Any:
    """What every ``{{ }}`` of the templates writes: a text from the evidence with its control, bidirectional and
    zero-width characters shown as escapes (``harness.visible``), so that a page shows what the log holds, in its
    order; markup the report built (already made visible) and other values as they are."""
    return printable(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


def _plain(value: Any) -> str:
    """A record's value as a cell shows it, before escaping (``None`` is shown as markup, see ``_shown``):
    booleans as yes/no, a mapping as ``k=v, ...``, a list joined with commas, anything else as its text."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int or kind is float:
        return str(value)
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ", ".join([f"{k}={x}" for k, x in value.items()])
    if isinstance(value, Iterable):
        return ", ".join(map(str, value))
    return str(value)


def _shown(value: Any) -> markupsafe.Markup:
    """A record's value in a cell, escaped; none as a muted dash."""
    return _MUTED_DASH if value is None else markupsafe.escape(printable(_plain(value)))


def _escape_each(texts: list[str]) -> list[str]:
    """``markupsafe.escape`` of each text. Escaping works character by character, so the texts are escaped
    in one call, joined by a NUL it leaves alone, unless a text holds a NUL itself: a call costs half a
    microsecond, and a page has hundreds of values an operation."""
    joined = "\0".join(texts)
    if joined.count("\0") == len(texts) - 1:
        return str(markupsafe.escape(printable_but_nul(joined))).split("\0")
    return [str(markupsafe.escape(printable(text))) for text in texts]


_ROW_TITLES = {"log": "log line", "flow": "journal line", "request": "ledger request", "effect": "ledger effect"}


def _evidence_html(row: _Row, offset: str) -> markupsafe.Markup:
    """One evidence record (``div.evidence``, see the page structure above): built here rather than in a
    macro, as the records are most of a page (a Jinja macro call and its ``{{ }}`` cost several times an
    f-string's); every text from the evidence is escaped by markupsafe, Jinja's own escaping."""
    summary = [(k, v) for k, v in row.summary if v is not None]
    texts = [row.dom, offset, row.title, row.note or ""]
    for href, code in row.cited_by:
        texts += (code, href)
    for k, v in summary:
        texts += (k, _plain(v))
    for k, v in row.fields:
        texts.append(k)
        if v is not None:
            texts.append(_plain(v))
    take = iter(_escape_each(texts)).__next__
    dom, offset, title, note = take(), take(), take(), take()
    cited = []
    for _ in row.cited_by:
        code, href = take(), take()
        cited.append(f'<a class="cited-by" data-code="{code}" href="{href}" title="cited by finding {code}">{code}</a>')
    line = "; ".join([f"{take()}: {take()}" for _ in summary])
    fields = "".join([f"<dt>{take()}</dt><dd>{_MUTED_DASH if v is None else take()}</dd>" for _, v in row.fields])
    note = f' <span class="note">({note})</span>' if row.note else ""
    return markupsafe.Markup(
        f'<div class="evidence {row.kind}{" cited" if row.cited_by else ""}" id="{dom}" data-kind="{row.kind}" '
        f'data-n="{row.n}">\n<span class="title">{_ROW_TITLES[row.kind]} {row.n}</span>\n'
        f'<span class="muted">{offset}</span>\n{"".join(cited)}<div>{title}{note}</div>\n'
        f'<div class="mono">{line}</div>\n'
        + (f'<details><summary>all fields</summary><dl class="fields">{fields}</dl></details>' if row.fields else "")
        + "</div>\n")


def _esc(value: Any) -> str:
    """``{{ value }}`` as Jinja writes it: the value's text (``None`` as "None"), made visible, escaped (markupsafe)."""
    return str(markupsafe.escape(_visible(value)))


def _joined(values: Iterable[Any], empty: str) -> str:
    """``{{ values|join(", ") or empty }}``."""
    return _esc(", ".join(map(str, values))) or empty


def _finding_html(f: dict[str, Any]) -> markupsafe.Markup:
    """One finding (``div.finding``) with the evidence it cites."""
    cites = "".join([f'<li><a class="cites" href="{_esc(c["href"])}">{_esc(c["text"])}</a></li>\n' if c["href"]
                     else f'<li><span class="cites-text">{_esc(c["text"])}</span></li>\n' for c in f["cites"]])
    code = _esc(f["code"])
    return markupsafe.Markup(
        f'<div class="finding" id="{_esc(f["id"])}" data-code="{code}">\n<span class="code">{code}</span> '
        f'<span class="rule">{_esc(f["rule"])}</span>: <span class="message">{_esc(f["message"])}</span>\n'
        f'<ul class="cites">\n{cites}</ul>\n</div>\n')


_ATTEMPTS_HEAD = ("<thead><tr><th>#</th><th>attempt</th><th>dispatch state</th><th>retry of</th><th>reason</th>"
                  "<th>authority</th><th>destination</th><th>key</th><th>request fingerprint</th><th>response</th>"
                  "<th>duration</th></tr></thead>\n")
_OBSERVATIONS_HEAD = ("<thead><tr><th>observation</th><th>what it checked</th><th>found</th><th>effects</th>"
                      "<th>may lag</th><th>the state</th></tr></thead>")
# the timeline's lanes in column order: each one's header and what a dot of its colour on the axis stands for. The
# header, the dots and the legend are all drawn from this table, so the legend cannot drift from the dots.
_LANES: dict[str, tuple[str, str]] = {
    "log": ("agent log", "a line of the agent's audit log"),
    "flow": ("proxy journal", "a request on the wire (a journal line; a ledger request where no proxy fronts the "
                              "destination)"),
    "effect": ("effect ledger", "an effect the destination committed"),
}
_TIMELINE_HEAD = ("<thead><tr><th>step</th><th>axis</th>" + "".join([f"<th>{head}</th>" for head, _ in _LANES.values()])
                  + "</tr></thead>\n")
_TIMELINE_LEGEND = ('<p class="timeline-legend">on the axis, left to right in time: '
                    + " · ".join([f'<span class="legend" data-lane="{lane}"><span class="dot dot-{lane}"></span> '
                                  f'{_esc(meaning)}</span>' for lane, (_, meaning) in _LANES.items()]) + "</p>\n")


def _attempt_html(a: dict[str, Any]) -> str:
    out = []
    if a["fork"]:
        out.append(f'<tr class="fork"><td colspan="11"><span class="fork-note">fork: the payload changed</span> '
                   f'<code>{_esc(_short(a["fork_from"], 40))}</code> → <code>{_esc(_short(a["fingerprint"], 40))}'
                   f'</code> (a changed payload is a new operation, not a retry)</td></tr>')
    ident = (f'<a href="{_esc(a["log_href"])}">{_esc(a["attempt_id"])}</a>' if a["log_href"]
             else _esc(a["attempt_id"]))
    retry = (f'<a class="retry-parent" href="{_esc(a["retry_href"])}">{_esc(a["retry_of"])}</a>' if a["retry_href"]
             else _esc(a["retry_of"] or "-"))
    decision = f'<div class="muted">{_esc(a["decision"])}</div>' if a["decision"] else ""
    same = (f' <span class="muted">(same key as attempt {_esc(a["same_key_as"])})</span>' if a["same_key_as"]
            else "")
    response = (f'<a href="{_esc(a["flow_href"])}">{_esc(a["response"])}</a>' if a["flow_href"]
                else _esc(a["response"]))
    out.append(
        f'<tr class="attempt{" fork" if a["fork"] else ""}" id="{_esc(a["id"])}">\n<td>{_esc(a["number"])}</td>\n'
        f'<td class="mono">{ident}</td>\n<td>{_esc(a["dispatch_state"] or "-")}</td>\n'
        f'<td class="mono">{retry}</td>\n<td>{_esc(a["reason"] or "-")}{decision}</td>\n'
        f'<td>{_joined(a["authority"], "-")}</td>\n<td>{_esc(a["destination"] or "-")}</td>\n'
        f'<td class="mono">{_esc(a["key"] or "none")}{same}</td>\n'
        f'<td class="mono" title="{_esc(a["fingerprint"] or "")}">{_esc(_short(a["fingerprint"], 24))}</td>\n'
        f'<td>{response}</td>\n<td>{_esc(a["duration"])}</td>\n</tr>\n')
    return "".join(out)


@lru_cache(maxsize=1024)  # the rules' labels: a few dozen, on every section
def _check_html(label: str, said: str) -> str:
    return (f'<li class="check-{said}" data-check="{_esc(label.split(" ")[0])}">{said.replace("-", " ")}: '
            f'{_esc(label)}</li>')


def _link_html(link: dict[str, Any]) -> str:
    relation, target = _esc(link["relation"]), _esc(link["target"])
    if link["href"]:
        return f'{relation} <a class="op-ref" data-relation="{relation}" href="{_esc(link["href"])}">{target}</a>'
    return f'{relation} <span class="op-ref" data-relation="{relation}">{target}</span>'


def _observation_html(o: dict[str, Any]) -> str:
    ident = f'<a href="{_esc(o["log_href"])}">{_esc(o["id"])}</a>' if o["log_href"] else _esc(o["id"])
    return (f'<tr class="observation"><td class="mono">{ident}</td><td>{_esc(o["checked"])}</td>'
            f'<td>{_shown(o["found"])}</td><td>{_joined(o["effect_refs"], "-")}</td><td>{_shown(o["lag"])}</td>'
            f'<td>{_esc(o["why"])}</td></tr>\n')


def _step_html(s: dict[str, Any]) -> str:
    lanes = s["lanes"]
    gap = (f'<tr class="gap" data-seconds="{s["gap"]:.3f}" style="height:{_esc(s["gap_height"])}px"><td colspan="5">'
           f'{_esc(s["gap_text"])} between the previous attempt\'s end and this one\'s start</td></tr>'
           if s["gap"] is not None else "")
    # a dot's position and offset are numbers this module formatted (``_timeline``): nothing to escape
    dots = "".join([f'<span class="dot dot-{lane}" style="left:{e["pos"]}%" title="{e["offset"]}"></span>'
                    for lane in _LANES for e in lanes[lane]])
    cells = "".join([f'<td class="lane-{lane}">'
                     + "".join([_evidence_html(e["row"], e["offset"]) for e in lanes[lane]]) + "</td>\n"
                     for lane in _LANES])
    return (f'{gap}<tr class="step step-{_esc(s["kind"])}{" fork" if s["fork"] else ""}">\n'
            f'<td class="time">{_esc(s["label"])}</td>\n<td class="axis"><div class="track">{dots}</div></td>\n'
            f'{cells}</tr>\n')


def _outcome_html(op: dict[str, Any]) -> str:
    holds = _joined(op["effects"], "no effect")
    if op["black_box"]:
        return (f"<b>outcome</b>: the destination holds {holds} for this intent (judged from the wire and the "
                f"ledger alone).\n")
    resolution = op["resolution"]
    if not resolution:
        return f"<b>outcome</b>: never resolved (open); the destination holds {holds}."
    reason = f" ({_esc(resolution['reason'])})" if resolution.get("reason") else ""
    evidence = ", ".join([f'<a href="{_esc(e["href"])}">{_esc(e["text"])}</a>' if e["href"] else _esc(e["text"])
                          for e in op["resolution_evidence"]]) or "none"
    line = f" (log line {_esc(resolution['line'])})" if resolution.get("line") else ""
    return (f"<b>outcome</b>: resolved <b>{_esc(resolution.get('state'))}</b>{reason};\n names "
            f"{_joined(resolution.get('effect_refs') or [], 'no effect')}; evidence {evidence}{line}; the "
            f"destination holds {holds}.\n")


def _section_html(op: dict[str, Any], noun: str) -> markupsafe.Markup:
    """One operation's (or black-box intent's) ``section.operation``, the page structure above. Built with
    f-strings, each text from the evidence through markupsafe's escape (Jinja's own), rather than by a macro:
    the sections are the pages' bulk, and a macro's ``{{ }}`` costs several times an f-string's."""
    intent = op["intent"]
    params = ""
    if op["params"]:
        params = ('<span class="mono">(' + ", ".join([f"{_esc(k)}={_shown(v)}" for k, v in op["params"]])
                  + ")</span>")
    effects = "none"
    if op["effects"]:
        effects = (f'<span class="{"dup" if op["duplicate"] else ""}">{_joined(op["effects"], "")}</span>'
                   + (f' <span class="dup">({len(op["effects"])} effects for one intent)</span>'
                      if op["duplicate"] else ""))
    key = f' · key: {_esc(op["key_behaviour"])}' if "key_behaviour" in op else ""
    links = '<p class="links">' + " · ".join(map(_link_html, op["links"])) + "</p>" if op["links"] else ""
    if op["findings"]:
        findings = f'<h3>findings ({len(op["findings"])})</h3>' + "".join(map(_finding_html, op["findings"]))
    else:
        findings = (f'<p class="held">no finding: {len(op["held"])} check(s) exercised and held'
                    + (f', {len(op["not_exercised"])} not exercised' if op["not_exercised"] else "") + "</p>")
    checks = ""
    if op["held"] or op["not_exercised"]:
        checks = (f'<details class="checks"><summary>checks of this {_esc(noun)}</summary><ul>\n'
                  + "".join([_check_html(label, "held") for label in op["held"]])
                  + "".join([_check_html(label, "not-exercised") for label in op["not_exercised"]])
                  + "</ul></details>")
    attempts = '<p class="muted">no attempt</p>'
    if op["attempts"]:
        attempts = ('<table class="attempts">\n' + _ATTEMPTS_HEAD + "<tbody>\n"
                    + "".join(map(_attempt_html, op["attempts"])) + "</tbody>\n</table>\n")
    observations = ""
    if op["observations"]:
        observations = (f'<h3>observations ({len(op["observations"])})</h3>\n<table class="observations">'
                        f'{_OBSERVATIONS_HEAD}<tbody>\n' + "".join(map(_observation_html, op["observations"]))
                        + "</tbody></table>\n")
    timeline = op["timeline"]
    span = (f' <span class="muted">(one time axis, {_esc(timeline["span"])} from the first record to the last)</span>'
            if timeline["span"] else "")
    return markupsafe.Markup(
        f'<section class="operation{" intent" if op["black_box"] else ""}" id="{_esc(op["id"])}" '
        f'data-operation-id="{_esc(op["operation_id"])}" data-classification="{_esc(op["classification"])}" '
        f'data-state="{_esc(op["state"] or "")}" data-codes="{_esc(op["codes"])}">\n'
        f'<h2>{_esc(noun)} {_esc(op["operation_id"])}</h2>\n'
        f'<div class="intent">intent <b>{_esc(op["intent_id"] or "-")}</b>: {_esc(intent.get("kind") or "?")} on '
        f'{_esc(intent.get("destination") or "?")}\n{params}</div>\n'
        # the verdict's own word first: the classification only counts effects ("healthy": one), no verdict
        f'<p><b class="op-verdict">{"FAIL" if op["findings"] else "PASS"}</b> · state: <b class="state">'
        f'{_esc(op["state"] or "-")}</b> · effects: <b class="classification cls-{_esc(op["classification"])}">'
        f'{_esc(EFFECTS_SAID.get(op["classification"], op["classification"]))}</b>\n · effects the destination holds: '
        f'{effects}{key}</p>\n{links}'
        # the timeline first, directly below the summary line: what happened, in order, is what a reader wants
        f'<h3>timeline{span}</h3>\n{_TIMELINE_LEGEND}<table class="timeline">\n{_TIMELINE_HEAD}<tbody>\n'
        + "".join(map(_step_html, timeline["steps"]))
        + f'</tbody>\n</table>\n<div class="findings">\n{findings}{checks}</div>\n'
        f'<h3>attempts ({len(op["attempts"])})</h3>\n{attempts}{observations}'
        f'<div class="outcome">\n{_outcome_html(op)}</div>\n</section>\n')


def _intent_text(intent: dict[str, Any] | None) -> str:
    if not intent:
        return "intent not logged"
    return f"{intent.get('kind')} on {intent.get('destination')}"


def _index_rows(builder: _Builder, here: int | None) -> list[dict[str, Any]]:
    verdict = builder.verdict
    subjects: list[tuple[str, str | None, dict[str, Any] | None, str, str | None, list[Finding]]]
    if verdict.black_box:
        subjects = [(i.intent_id, i.intent_id, i.intent, i.classification, None, i.findings) for i in verdict.intents]
    else:
        subjects = [(o.operation_id, o.intent_id, o.intent, o.classification, o.state, o.findings)
                    for o in verdict.operations]
    rows = [{"subject": s, "href": builder.op_href(s, here), "intent_id": intent_id, "intent": _intent_text(intent),
             "classification": cls, "state": state, "codes": " ".join(sorted({f.code for f in findings}))}
            for s, intent_id, intent, cls, state, findings in subjects]
    for row in rows:  # made once: the same row is on the index and on each filtered index it belongs to
        row["html"] = _index_row_html(row)
    return rows


def _index_row_html(r: dict[str, Any]) -> markupsafe.Markup:
    """One ``tr.operation`` of an index."""
    subject, href, intent_id, intent, cls, state, codes = _escape_each([str(x) for x in (
        r["subject"], r["href"] or "", r["intent_id"] or "-", r["intent"], r["classification"], r["state"] or "",
        r["codes"])])
    link = f'<a class="op-link" href="{href}">{subject}</a>' if r["href"] else subject
    return markupsafe.Markup(
        f'<tr class="operation" data-operation-id="{subject}" data-classification="{cls}" data-state="{state}" '
        f'data-codes="{codes}">\n<td>{link}</td>\n<td>{intent_id}: {intent}</td>\n'
        f'<td class="cls-{cls}">{_esc(EFFECTS_SAID.get(r["classification"], cls))}</td>'
        f'<td>{state or "-"}</td><td>{codes or "none"}</td>\n</tr>\n')


def _pages(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def _outcome(verdict: Verdict, run: RunInfo) -> tuple[str, list[str]]:
    if run.incomplete:
        return "INCOMPLETE", ["the harness lost evidence of this run, so the agent was not judged:", *run.incomplete]
    count = len(verdict.intents) if verdict.black_box else len(verdict.operations)
    what = "intent(s)" if verdict.black_box else "operation(s)"
    if verdict.passed:
        return "PASSED", [f"{count} {what}, no rule found anything"]
    by_subject: dict[str, dict[str, None]] = {}
    for finding in verdict.findings:
        by_subject.setdefault(finding.subject or "run-wide", {})[finding.code] = None
    why = [f"{len(verdict.findings)} finding(s) over {count} {what}"]
    why += [f"{' '.join(codes)} on {subject}" for subject, codes in list(by_subject.items())[:20]]
    if len(by_subject) > 20:
        why.append(f"... and {len(by_subject) - 20} more (the index below lists them all)")
    return "FAILED", why


@collector_paused()  # the pages are millions of short-lived strings beside a run's long-lived evidence
def write_html_report(path: Path, verdict: Verdict, *, run: RunInfo | None = None,
                      evidence: Evidence | None = None) -> list[Path]:
    """Write the report to ``path`` (and, above ``ONE_FILE_LIMIT`` operations, its pages beside it, named
    after its stem); returns every file written, ``path`` first."""
    run = run or RunInfo()
    path = Path(path)
    records = _Records(evidence)
    if not verdict.black_box:
        records.correlate_observations()  # nothing to do offline (no journal)
    subjects = len(verdict.intents) if verdict.black_box else len(verdict.operations)
    paged = subjects > ONE_FILE_LIMIT
    stem = path.stem
    builder = _Builder(verdict, records, paged=paged, stem=stem)
    env = _environment()
    outcome, why = _outcome(verdict, run)
    codes: dict[str, dict[str, Any]] = {}
    for finding in verdict.findings:
        entry = codes.setdefault(finding.code, {"code": finding.code, "rule": finding.rule, "count": 0})
        entry["count"] += 1
    index_rows = _index_rows(builder, None)
    classes: dict[str, int] = {}
    for row in index_rows:
        classes[row["classification"]] = classes.get(row["classification"], 0) + 1
    rule_codes = sorted({c for row in index_rows for c in row["codes"].split()})

    def filter_href(kind: str, value: str) -> str:
        return f"{stem}-{kind}-{value}-0001.html" if paged else f"#index-{kind}-{value}"

    for entry in codes.values():
        entry["href"] = filter_href("rule", entry["code"]) if entry["code"] in rule_codes else None
    title = run.title or (f"{run.scenario} with {run.agent}" if run.scenario else f"audit of {run.evidence_dir}")
    common = {
        "title": title, "run": run, "outcome": outcome, "why": why, "mode": verdict.mode,
        "codes": sorted(codes.values(), key=lambda e: e["code"]), "classes": sorted(classes.items()),
        "rule_codes": rule_codes, "main_href": path.name, "paged": paged, "subjects": subjects,
        "noun": "intent" if verdict.black_box else "operation", "black_box": verdict.black_box,
        "not_judged": verdict.not_judged, "unattributed": verdict.unattributed,
        "checks": sorted(verdict.checks.items(), key=lambda c: (c[1] != "failed", c[1] != "held", c[0])),
        "check_counts": [(said, n) for said in ("failed", "held", "not exercised")
                         if (n := sum(s == said for s in verdict.checks.values()))],
        "filters": {"classification": [(c, filter_href("classification", c), n) for c, n in sorted(classes.items())],
                    "rule": [(c, filter_href("rule", c),
                              sum(c in r["codes"].split() for r in index_rows)) for c in rule_codes]},
    }

    def sections(items: Iterable[Any], here: int | None) -> Iterator[dict[str, Any]]:
        for item in items:
            yield builder.intent(item, here) if verdict.black_box else builder.operation(item, here)

    items: list[Any] = list(verdict.intents if verdict.black_box else verdict.operations)
    written = [path]
    if not paged:
        run_findings, run_rows = builder.run_findings(None)
        filtered = [("classification", c, [r for r in index_rows if r["classification"] == c]) for c, _ in
                    sorted(classes.items())]
        filtered += [("rule", c, [r for r in index_rows if c in r["codes"].split()]) for c in rule_codes]
        html = env.get_template("main.html.j2").render(
            **common, index_rows=index_rows, index_pages=[], ops_pages=[], filtered=filtered,
            sections=sections(items, None), sections_first=subjects <= SECTIONS_FIRST_LIMIT,
            run_findings=run_findings, run_rows=run_rows)
        write_file(path, html, follow_folder=True)
        return written
    index_pages = _pages(index_rows, INDEX_PAGE_SIZE)
    index_names = [f"{stem}-index-{k:04d}.html" for k in range(1, len(index_pages) + 1)]
    ops_names = [builder.ops_page(k) for k in range(1, builder.pages + 1)]
    run_findings, run_rows = builder.run_findings(None)
    main = env.get_template("main.html.j2").render(
        **common, index_rows=index_pages[0], index_pages=index_names, ops_pages=ops_names, filtered=[],
        sections=iter(()), sections_first=False, run_findings=run_findings, run_rows=run_rows)
    write_file(path, main, follow_folder=True)
    page_template = env.get_template("index_page.html.j2")

    def write_index(kind: str, value: str | None, rows: list[dict[str, Any]]) -> None:
        pages = _pages(rows, INDEX_PAGE_SIZE)
        names = [f"{stem}-{kind}-{value}-{k:04d}.html" if value else f"{stem}-{kind}-{k:04d}.html"
                 for k in range(1, len(pages) + 1)]
        for k, (name, page) in enumerate(zip(names, pages, strict=True)):
            target = path.with_name(name)
            write_file(target, page_template.render(
                **common, heading=(f"operations with {kind} {value}" if value else "every operation"),
                index_rows=page, page=k + 1, names=names), follow_folder=True)
            written.append(target)

    write_index("index", None, index_rows)
    for c in sorted(classes):
        write_index("classification", c, [r for r in index_rows if r["classification"] == c])
    for c in rule_codes:
        write_index("rule", c, [r for r in index_rows if c in r["codes"].split()])
    ops_template = env.get_template("ops_page.html.j2")
    for k, chunk in enumerate(_pages(items, PAGE_SIZE), start=1):
        target = path.with_name(ops_names[k - 1])
        write_file(target, ops_template.render(**common, page=k, names=ops_names, sections=sections(chunk, k)),
                   follow_folder=True)
        written.append(target)
    return written


def write_result_report(result: ScenarioResult, evidence: Evidence | None = None,
                        path: Path | None = None) -> Path:
    """A scenario run's report (default: ``REPORT_HTML`` in its evidence folder); its evidence is read from the
    folder when not given."""
    from harness.errors import EvidenceError
    from harness.evidence import load_evidence

    if evidence is None:
        try:
            evidence = load_evidence(result.evidence_dir)
        except EvidenceError:
            evidence = None
    target = Path(path) if path is not None else Path(result.evidence_dir) / REPORT_HTML
    mode = " (black-box)" if result.verdict.black_box else ""
    write_html_report(target, result.verdict, evidence=evidence,
                      run=RunInfo(scenario=result.scenario, agent=result.agent + mode,
                                  evidence_dir=str(result.evidence_dir), incomplete=list(result.incomplete)))
    return target
