"""Black-box mode: the wire and the ledger attributed to the run's intents, without an audit log.

A program that writes no audit log (a vendor SDK, a plain HTTP client) is judged from the proxy
journal and the effect ledger alone. Each write that crossed the wire, and each ledger row it left,
is given to one intent of the run (``attribute``); the black-box rules then judge each intent's
attempts and effects (``IntentContext``). The attribution, in the order it is tried
(docs/checker.md, 'Black-box mode'):

1. A ledger request row that reached a route (``kind`` set) belongs to the intent of the same
   destination and kind; when several intents share them, to the one whose params the row's
   ``params`` hold (each param compared as text, nested ones flattened to ``a[b]`` as a form body
   spells them, so ``1999`` equals the form's ``"1999"``); when several hold them, the one with the
   most params; else it is ambiguous.
2. A journal flow is its ledger rows' intent, through its ``flow_id``.
3. A flow that never reached the destination (a synthetic status, a dropped request) belongs to
   the one intent whose destination has an operation of its method and route path.
4. What is left: a flow whose body fingerprint, or whose idempotency key (on the same destination),
   is that of an attributed flow is that flow's intent.
5. Anything else is unattributed, with the reason (no route, ambiguous, no intent of that kind).

Reads (GET, HEAD, ...) are not attempts and are not attributed. Effects follow the request that
committed them (``flow_id``, else ``request_seq``).
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from harness.checker.context import SAFE_METHODS
from harness.checker.correlation import wire_records
from harness.checker.readings import bare_path, ts_value
from harness.contract import DestinationContract, path_template_pattern
from harness.evidence import Evidence

NATURALLY_IDEMPOTENT = frozenset({"PUT", "DELETE"})  # set-state and delete: a rerun converges
# What a program can see of a write whose outcome it cannot know: no answer at all (the statuses a
# 5xx aside), the connection closed, reset, timed out, or still open when the run ended.
UNANSWERED = frozenset({"connection_closed", "connection_reset", "timeout", "in_flight_at_end"})


def param_text(value: Any) -> str:
    """A param as text: strings as they are, anything else as JSON (``1999``, ``true``), so a JSON body's
    number equals the form body's string."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def flat_params(params: Any, prefix: str = "") -> dict[str, str]:
    """Leaf params as text under their form-body names: ``{"metadata": {"id": 7}}`` -> ``{"metadata[id]": "7"}``."""
    out: dict[str, str] = {}
    items = params.items() if isinstance(params, dict) else enumerate(params) if isinstance(params, list) else None
    if items is None:
        return {prefix: param_text(params)} if prefix else {}
    for key, value in items:
        name = f"{prefix}[{key}]" if prefix else str(key)
        if isinstance(value, (dict, list)) and value:
            out.update(flat_params(value, name))
        else:
            out[name] = param_text(value)
    return out


def row_params(row: dict[str, Any], column: str = "params") -> dict[str, Any] | None:
    """A ledger row's JSON-text column (a request's ``params``, an effect's ``committed_params``) as a
    dict, None when it holds none."""
    value = row.get(column)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def holds_params(params: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """The destination's parsed params hold every one of the intent's, compared as text."""
    if params is None:
        return False
    have = flat_params(params)
    return all(have.get(name) == text for name, text in flat_params(wanted).items())


def retry_after_seconds(entry: dict[str, Any]) -> float | None:
    """The ``Retry-After`` the client received with a flow's answer, in seconds (a number, or an HTTP date
    measured from when the answer went out); None when it had none or it does not parse."""
    header = entry.get("client_retry_after")
    if not isinstance(header, str) or not header.strip():
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if entry.get("ts_done") is None:
        return None
    return max(0.0, when.timestamp() - ts_value(entry["ts_done"]))


@dataclass
class WireAttempt:
    """One write the program sent for an intent: its journal entry (or, for a destination the proxy does
    not front, the ledger row standing in for one), the ledger rows it left (none: it never reached the
    destination; two: the network delivered it twice) and why it is the intent's."""

    entry: dict[str, Any]
    rows: list[dict[str, Any]]
    how: str  # how it was attributed: "kind and params", "only intent", "route", "fingerprint", "key"

    @property
    def flow_id(self) -> str:
        return str(self.entry.get("flow_id"))

    @property
    def method(self) -> str:
        return str(self.entry.get("method") or "").upper()

    @property
    def path(self) -> str | None:
        return bare_path(self.entry.get("path"))

    @property
    def key(self) -> str | None:
        key = self.entry.get("idempotency_key")
        if not key and self.rows:
            key = self.rows[0].get("idempotency_key")
        return str(key) if key else None

    @property
    def sent_at(self) -> float:
        return ts_value(self.entry.get("ts_request"))

    @property
    def answered_at(self) -> float:
        """When the flow ended (its answer went out, or it broke off); when it was sent, if unknown."""
        done = self.entry.get("ts_done")
        return ts_value(done) if done is not None else self.sent_at

    @property
    def proxied(self) -> bool:
        return self.entry.get("source", "journal") == "journal"

    @property
    def client_status(self) -> int | None:
        status = self.entry.get("client_status")
        if self.entry.get("client_outcome") == "response" and isinstance(status, int) and not isinstance(status, bool):
            return status
        return None

    def unknown(self) -> str | None:
        """Why the program cannot know whether this write acted (its answer lost, or a 5xx: the destination
        may have committed before failing), or None when it can (an answer below 500, a refused connect,
        or a destination the proxy does not front, where what the client saw is not recorded)."""
        outcome = self.entry.get("client_outcome")
        if not self.proxied or outcome is None or outcome == "refused":
            return None
        if outcome in UNANSWERED:
            left = "after it reached the destination" if self.entry.get("forwarded") else "before it was forwarded"
            return f"no answer: {outcome}, {left}"
        status = self.client_status
        if status is not None and status >= 500:
            return f"it got a {status}"
        if self.entry.get("tool_error"):
            return "it got an MCP error result (the tool may have committed before failing)"
        return None

    @property
    def idempotent_method(self) -> bool:
        """PUT and DELETE converge when rerun; POST, PATCH and commands do not on their own."""
        return self.method in NATURALLY_IDEMPOTENT

    def fingerprint(self) -> str | None:
        """The payload as the destination read it (its ledger fingerprint, which leaves out its volatile
        fields), else the body's fingerprint on the wire."""
        for row in self.rows:
            if row.get("payload_fingerprint"):
                return str(row["payload_fingerprint"])
        fp = self.entry.get("body_fingerprint")
        return str(fp) if fp else None

    def saw(self) -> str:
        """What the destination did with it, in a few words."""
        if not self.rows:
            return "never reached the destination"
        return ", ".join(f"{r.get('status')} {r.get('outcome')}"
                         + (f" {r['effect_ref']}" if r.get("effect_ref") else "") for r in self.rows)

    def client_saw(self) -> str:
        if not self.proxied:
            return "not proxied (what the client saw is not recorded)"
        outcome = self.entry.get("client_outcome")
        if outcome == "response":
            text = f"a {self.entry.get('client_status')} answer"
            wait = retry_after_seconds(self.entry)
            return text + (f" with Retry-After {self.entry.get('client_retry_after')}" if wait is not None else "")
        return f"no answer ({outcome})"

    def ref(self) -> dict[str, Any]:
        """Evidence pointer: the journal line (or the ledger row standing in for it)."""
        if not self.proxied:
            return {"source": "ledger", "table": "requests", "seq": self.entry.get("ledger_seq"),
                    "method": self.entry.get("method"), "path": self.entry.get("path"),
                    "idempotency_key": self.entry.get("idempotency_key")}
        e = self.entry
        return {"source": "journal", "line": e.get("_line"), "seq": e.get("seq"), "flow_id": e.get("flow_id"),
                "method": e.get("method"), "path": e.get("path"), "idempotency_key": e.get("idempotency_key"),
                "forwarded": e.get("forwarded"), "upstream_status": e.get("upstream_status"),
                "client_outcome": e.get("client_outcome"), "client_status": e.get("client_status"),
                "fault": e.get("fault")}

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        return {"flow_id": self.flow_id, "line": e.get("_line"), "source": e.get("source", "journal"),
                "method": e.get("method"), "path": e.get("path"), "idempotency_key": self.key,
                "body_fingerprint": e.get("body_fingerprint"), "ts_request": e.get("ts_request"),
                "ts_done": e.get("ts_done"), "forwarded": e.get("forwarded"), "fault": e.get("fault"),
                "client_outcome": e.get("client_outcome"), "client_status": e.get("client_status"),
                "client_retry_after": e.get("client_retry_after"), "attributed_by": self.how,
                "destination_saw": [{k: r.get(k) for k in ("seq", "status", "outcome", "effect_ref")}
                                    for r in self.rows]}


@dataclass
class IntentContext:
    """One intent as the wire and the ledger show it: the writes attributed to it in the order they were
    sent, and the effects they committed. What black-box rules read."""

    intent: dict[str, Any]
    contract: DestinationContract | None = None
    spec: dict[str, Any] | None = None
    attempts: list[WireAttempt] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)  # ledger effect rows (new effects, not replays)
    reports: list[dict[str, Any]] = field(default_factory=list)  # what the program told its caller, in order
    _positions: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    def position(self, attempt: WireAttempt) -> int:
        """The attempt's index in ``attempts`` (the object itself; an index built once the attempts are sorted)."""
        if len(self._positions) != len(self.attempts) or id(attempt) not in self._positions:
            self._positions = {id(a): n for n, a in enumerate(self.attempts)}
        return self._positions[id(attempt)]

    @property
    def intent_id(self) -> str:
        return str(self.intent.get("intent_id"))

    @property
    def destination(self) -> str | None:
        value = self.intent.get("destination")
        return str(value) if value is not None else None

    @property
    def kind(self) -> str | None:
        value = self.intent.get("kind")
        return str(value) if value is not None else None

    def deduplicates(self) -> bool | None:
        """Does the destination deduplicate this kind of write on a key? None when its contract is unknown."""
        return self.contract.deduplicates(self.kind) if self.contract is not None else None

    def key_name(self) -> str:
        """Where the destination reads its key, for a sentence: the header or the body field."""
        idem = self.contract.idempotency if self.contract is not None else None
        if idem is not None and idem.header:
            return f"the {idem.header} header"
        if idem is not None and idem.body_field:
            return f"the {idem.body_field} body field"
        return "a key"

    def retention_seconds(self) -> float | None:
        return self.contract.idempotency.retention_seconds if self.contract is not None else None

    def effect_refs(self) -> list[str]:
        return list(dict.fromkeys(str(r["effect_ref"]) for r in self.effects if r.get("effect_ref")))

    def committing_flows(self) -> list[str]:
        """The flows that committed this intent's effects, each once (one flow delivered twice is one)."""
        return list(dict.fromkeys(str(r.get("flow_id") or f"ledger:{r.get('request_seq')}") for r in self.effects))

    def keys(self) -> list[str | None]:
        """The key each attempt carried, in order (None: no key)."""
        return [a.key for a in self.attempts]

    def key_behaviour(self) -> str:
        """How the attempts used a key: "one key on N attempts", "no key", "key changed" or "-" (no attempt)."""
        if not self.attempts:
            return "-"
        keys = self.keys()
        distinct = list(dict.fromkeys(keys))
        if distinct == [None]:
            return "no key"
        if len(distinct) > 1:
            return "key changed"
        return f"one key on {len(keys)} attempt{'s' if len(keys) != 1 else ''}"

    def retry_gaps(self) -> list[float]:
        """Seconds between each attempt's end and the next one's start, on the wire's clock."""
        return [round(later.sent_at - earlier.answered_at, 3)
                for earlier, later in zip(self.attempts, self.attempts[1:], strict=False)]

    def key_fingerprints(self) -> dict[str, list[WireAttempt]]:
        """key -> the attempts under it, for each key sent over more than one payload."""
        by_key: dict[str, list[WireAttempt]] = {}
        for attempt in self.attempts:
            if attempt.key:
                by_key.setdefault(attempt.key, []).append(attempt)
        return {key: group for key, group in by_key.items() if len({p for p in payload_prints(group) if p}) > 1}

    def classify(self) -> str:
        """The second article's classes from the ledger: a key over two payloads, then the count of effects."""
        if self.key_fingerprints():
            return "key_conflict"
        return "duplicate" if len(self.effect_refs()) > 1 else "healthy"

    def facts(self) -> dict[str, Any]:
        """What a certification table shows of the intent: effects, attempts, keys, retry spacing."""
        return {"intent_id": self.intent_id, "destination": self.destination, "kind": self.kind,
                "effects": self.effect_refs(), "attempts": len(self.attempts), "keys": self.keys(),
                "key_behaviour": self.key_behaviour(), "retry_gaps": self.retry_gaps()}


def payload_prints(group: list[WireAttempt]) -> list[str | None]:
    """Each attempt's payload fingerprint, all from one source so that they compare: the destination's (which
    leaves out its volatile fields and a body token) when every attempt reached it, else the body's on the wire
    (an attempt answered by the proxy, a synthetic 429, never reached it; the two kinds never equal each other
    for a form body or a client token)."""
    if all(any(row.get("payload_fingerprint") for row in a.rows) for a in group):
        return [a.fingerprint() for a in group]
    return [str(a.entry["body_fingerprint"]) if a.entry.get("body_fingerprint") else None for a in group]


@dataclass
class Unattributed:
    """A write or an effect no intent accounts for, and why."""

    record: dict[str, Any]  # the journal entry (or ledger stand-in) of a write, or a ledger effect row
    reason: str
    kind: str = "write"  # "write" | "effect"

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        if self.kind == "effect":
            return {"kind": "effect", "reason": self.reason, "destination": r.get("destination"),
                    "effect_ref": r.get("effect_ref"), "seq": r.get("seq"), "flow_id": r.get("flow_id")}
        return {"kind": "write", "reason": self.reason, "destination": r.get("destination"),
                "method": r.get("method"), "path": r.get("path"), "flow_id": r.get("flow_id"),
                "line": r.get("_line"), "idempotency_key": r.get("idempotency_key")}


@dataclass
class Attribution:
    """Every intent of the run with its writes and effects, and what could not be attributed."""

    intents: dict[str, IntentContext] = field(default_factory=dict)
    unattributed: list[Unattributed] = field(default_factory=list)

    def effects_committed(self, evidence: Evidence) -> int:
        """Distinct effects the destinations hold (attributed or not)."""
        return len({(e.get("destination"), e.get("effect_ref")) for e in evidence.effects
                    if not e.get("replay") and e.get("effect_ref")})

    def facts(self, evidence: Evidence) -> dict[str, Any]:
        """The run in a certification table's words: distinct effects committed, write attempts on the wire
        (attributed or not), the key behaviour, and each intent's facts."""
        intents = [ctx.facts() for ctx in self.intents.values()]
        writes = sum(len(ctx.attempts) for ctx in self.intents.values()) + sum(
            1 for u in self.unattributed if u.kind == "write")
        return {"effects": self.effects_committed(evidence), "attempts": writes,
                "key_behaviour": summary_key_behaviour([ctx for ctx in self.intents.values()]),
                "intents": intents}


def summary_key_behaviour(intents: list[IntentContext]) -> str:
    """One run's key behaviour: the intent's; over several intents the worst one ("key changed", then "no key"),
    else "one key per intent on N attempts"."""
    said = [ctx.key_behaviour() for ctx in intents if ctx.attempts]
    if not said:
        return "-"
    if len(said) == 1:
        return said[0]
    for worst in ("key changed", "no key"):
        if worst in said:
            return worst
    return f"one key per intent on {sum(len(ctx.attempts) for ctx in intents)} attempts"


def attribute(evidence: Evidence) -> Attribution:
    """Give each write on the wire, each ledger request row and each effect to one of the run's intents
    (the rule: this module's docstring). Linear in intents, writes and rows: intents are indexed by
    destination and kind (``_Intents``), and step 4 keeps, per body fingerprint and per key, the intents
    of the flows attributed so far (``_Likeness``)."""
    result = Attribution()
    contracts: dict[str, DestinationContract] = {}
    for name, entry in evidence.destinations.items():
        if isinstance(entry, dict) and entry.get("contract") is not None:
            contracts[name] = DestinationContract.from_dict(entry["contract"])
    for intent in evidence.intents:
        if not intent.get("intent_id"):
            continue
        destination = str(intent.get("destination"))
        entry = evidence.destinations.get(destination)
        spec = entry.get("spec") if isinstance(entry, dict) else None
        result.intents.setdefault(str(intent["intent_id"]),
                                  IntentContext(intent, contracts.get(destination), spec if isinstance(spec, dict)
                                                else None))
    for report in evidence.reports:  # what the program told its caller (Evidence.reports), by intent
        if report.get("intent_id") in result.intents:
            result.intents[report["intent_id"]].reports.append(report)
    intents = _Intents(result)
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in evidence.requests:
        rows_of.setdefault(str(row.get("flow_id") or f"ledger:{row.get('seq')}"), []).append(row)
    writes = [e for e in wire_records(evidence.journal, evidence.requests, evidence.destinations)
              if is_write(e, rows_of)]
    owner: dict[int, tuple[IntentContext, str]] = {}  # index in writes -> (its intent, how)
    why: dict[int, str] = {}
    for index, entry in enumerate(writes):
        found = _by_rows(intents, rows_of.get(str(entry.get("flow_id")), []))
        if found is None:
            found = _by_route(intents, entry, contracts)
        if isinstance(found, str):
            why[index] = found
        else:
            owner[index] = found
    _attribute_by_likeness(writes, owner)
    lost: dict[str, str] = {}  # flow id -> why its write is no intent's
    for index, entry in enumerate(writes):
        if index in owner:
            ctx, how = owner[index]
            ctx.attempts.append(WireAttempt(entry, rows_of.get(str(entry.get("flow_id")), []), how))
        else:
            lost[str(entry.get("flow_id"))] = reason = why.get(index, "no intent matches it")
            result.unattributed.append(Unattributed(entry, reason))
    flow_intent = {a.flow_id: ctx for ctx in result.intents.values() for a in ctx.attempts}
    seq_flow = {row.get("seq"): str(row.get("flow_id") or f"ledger:{row.get('seq')}") for row in evidence.requests}
    for ctx in result.intents.values():
        ctx.attempts.sort(key=lambda a: (a.sent_at, a.entry.get("seq") or 0))
    for effect in evidence.effects:
        if effect.get("replay"):
            continue
        flow = str(effect.get("flow_id") or seq_flow.get(effect.get("request_seq")) or "")
        owner_ctx = flow_intent.get(flow)
        if owner_ctx is None:
            reason = f"the write that committed it (flow {flow}) is no intent's: {lost[flow]}" if flow in lost else \
                "no write on the wire committed it"
            result.unattributed.append(Unattributed(effect, reason, kind="effect"))
        else:
            owner_ctx.effects.append(effect)
    return result


# A reason names at most this many intents ("... and N more"): a run of 100,000 intents of one kind must not
# write each of them into the reason of every write it cannot attribute.
NAMED_INTENTS = 10


def named_intents(contexts: list[IntentContext]) -> str:
    """The intents' ids for a sentence, the first ``NAMED_INTENTS`` of them and how many more."""
    shown = ", ".join(c.intent_id for c in contexts[:NAMED_INTENTS])
    more = len(contexts) - NAMED_INTENTS
    return f"{shown} and {more} more" if more > 0 else shown


class _Intents:
    """The run's intents by (destination, kind), in the run's order, each with its params flattened once;
    per group, each intent under its rarest (name, text) param, so that the intents a row's params hold are
    found among the few that share one of its params (``holding``)."""

    def __init__(self, result: Attribution) -> None:
        self.groups: dict[tuple[str | None, str | None], list[IntentContext]] = {}
        for ctx in result.intents.values():
            self.groups.setdefault((ctx.destination, ctx.kind), []).append(ctx)
        self.flat: dict[int, dict[str, str]] = {
            id(ctx): flat_params(ctx.intent.get("params") or {}) for ctx in result.intents.values()}
        self.order = {id(ctx): n for n, ctx in enumerate(result.intents.values())}
        self._merged: dict[tuple[str | None, tuple[Any, ...]], list[IntentContext]] = {}
        self._anchors: dict[tuple[str | None, str | None], tuple[dict[tuple[str, str], list[IntentContext]],
                                                                 list[IntentContext]]] = {}

    def of(self, destination: Any, kinds: tuple[Any, ...]) -> list[IntentContext]:
        """The intents of ``destination`` whose kind is one of ``kinds``, in the run's order (an intent's
        destination and kind are text, or None: nothing else equals them). The list is shared: read it only."""
        if not (destination is None or isinstance(destination, str)):
            return []
        if len(kinds) == 1:
            return self.groups.get((destination, kinds[0]), []) if isinstance(kinds[0], str) else []
        key = (destination, kinds)
        if key not in self._merged:
            found = [c for kind in kinds if isinstance(kind, str) for c in self.groups.get((destination, kind), ())]
            self._merged[key] = sorted(found, key=lambda c: self.order[id(c)])
        return self._merged[key]

    def holding(self, destination: str | None, kind: str | None, have: dict[str, str]) -> list[IntentContext]:
        """The intents of (destination, kind) whose every param ``have`` holds, in the run's order."""
        group = (destination, kind)
        if group not in self._anchors:
            counts: dict[tuple[str, str], int] = {}
            for ctx in self.groups.get(group, ()):
                for pair in self.flat[id(ctx)].items():
                    counts[pair] = counts.get(pair, 0) + 1
            anchored: dict[tuple[str, str], list[IntentContext]] = {}
            always: list[IntentContext] = []
            for ctx in self.groups.get(group, ()):
                pairs = self.flat[id(ctx)].items()
                if not pairs:
                    always.append(ctx)  # no params: any row holds them
                    continue
                anchored.setdefault(min(pairs, key=lambda pair: counts[pair]), []).append(ctx)
            self._anchors[group] = (anchored, always)
        anchored, always = self._anchors[group]
        seen: dict[int, IntentContext] = {id(c): c for c in always}
        for pair in have.items():
            for ctx in anchored.get(pair, ()):
                seen.setdefault(id(ctx), ctx)
        holding = [c for c in seen.values()
                   if all(have.get(name) == text for name, text in self.flat[id(c)].items())]
        holding.sort(key=lambda c: self.order[id(c)])
        return holding


def _attribute_by_likeness(writes: list[dict[str, Any]], owner: dict[int, tuple[IntentContext, str]]) -> None:
    """Step 4, to its fixed point: a write not yet attributed whose body fingerprint, else key, is that of
    attributed flows of its destination that name one intent, is that intent's (``_by_likeness``).

    As sweeps over the writes in order until one attributes nothing, each write seeing what the sweep
    attributed before it; but a write is looked at again only once its fingerprint or its key got its first
    intent (a write that found none saw none or several there; a second one changes nothing for it), so each
    write is looked at a bounded number of times."""
    names = (("body_fingerprint", "fingerprint"), ("idempotency_key", "key"))
    owners: dict[tuple[str, Any, Any], dict[int, IntentContext]] = {}
    waiting: dict[tuple[str, Any, Any], list[int]] = {}

    def slots(entry: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """Where the write's intents are kept: per set value, (field, destination, value)."""
        return [(name, _hashable(entry.get("destination")), _hashable(entry.get(name)))
                for name, _ in names if entry.get(name)]

    def likeness(entry: dict[str, Any]) -> tuple[IntentContext, str] | None:
        hows = dict(names)
        for slot in slots(entry):
            found = owners.get(slot)
            if found is not None and len(found) == 1:
                return next(iter(found.values())), hows[slot[0]]
        return None

    changed_slots: list[tuple[str, Any, Any]] = []

    def own(index: int, ctx: IntentContext) -> None:
        for slot in slots(writes[index]):
            held = owners.setdefault(slot, {})
            if id(ctx) not in held:
                held[id(ctx)] = ctx
                if len(held) == 1:  # its first intent: a write waiting on it may now find one
                    changed_slots.append(slot)

    for index, (ctx, _) in owner.items():
        own(index, ctx)
    changed_slots.clear()
    for index, entry in enumerate(writes):
        if index not in owner:
            for slot in slots(entry):
                waiting.setdefault(slot, []).append(index)
    pending = [i for i in range(len(writes)) if i not in owner]
    while pending:  # one sweep
        heap = list(pending)
        heapq.heapify(heap)
        queued = set(pending)
        later: set[int] = set()
        changed = False
        while heap:
            index = heapq.heappop(heap)
            if index in owner:
                continue
            found = likeness(writes[index])
            if found is None:
                continue
            owner[index] = found
            changed = True
            own(index, found[0])
            for slot in changed_slots:
                for other in waiting.get(slot, ()):
                    if other in owner:
                        continue
                    if other > index and other not in queued:  # still ahead in this sweep
                        queued.add(other)
                        heapq.heappush(heap, other)
                    elif other < index:
                        later.add(other)  # the next sweep looks at it again
            changed_slots.clear()
        pending = sorted(later) if changed else []


def _hashable(value: Any) -> Any:
    """A journal value as a dict key that compares as the value does (a hand-written journal may hold lists)."""
    if isinstance(value, dict):
        return frozenset((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def is_write(entry: dict[str, Any], rows_of: dict[str, list[dict[str, Any]]]) -> bool:
    """A request that may act: not a read, or one a destination served as an operation kind. A JSON-RPC
    message the checker routes as a read (protocol, a tool without effect: ``mcp_route``) never is."""
    if entry.get("read"):
        return False
    if str(entry.get("method") or "").upper() not in SAFE_METHODS:
        return True
    return any(r.get("kind") for r in rows_of.get(str(entry.get("flow_id")), []))


def _by_rows(intents: _Intents, rows: list[dict[str, Any]]) -> tuple[IntentContext, str] | str | None:
    """The intent of a flow's ledger rows (steps 1-2), a reason it has none, or None: no row says."""
    for row in rows:
        kind = row.get("kind")
        if not kind:
            continue
        candidates = intents.of(row.get("destination"), (kind,))
        if not candidates:
            return f"no intent asks for {kind} on {row.get('destination')}"
        if len(candidates) == 1:
            return candidates[0], "only intent"
        params = row_params(row)
        holding = intents.holding(row.get("destination"), kind, flat_params(params)) if params is not None else []
        if holding:
            most = max(len(intents.flat[id(c)]) for c in holding)
            best = [c for c in holding if len(intents.flat[id(c)]) == most]
            if len(best) == 1:
                return best[0], "kind and params"
            return f"its params hold those of intents {named_intents(best)} alike"
        return f"its params hold those of none of the intents {named_intents(candidates)}"
    return None


def _by_route(intents: _Intents, entry: dict[str, Any],
              contracts: dict[str, DestinationContract]) -> tuple[IntentContext, str] | str:
    """A flow the ledger has no routed row of (step 3): the one intent whose operation has its method and path."""
    destination, method, path = entry.get("destination"), str(entry.get("method") or "").upper(), bare_path(
        entry.get("path"))
    contract = contracts.get(str(destination))
    kinds = {kind for kind, op in (contract.operations.items() if contract is not None else ())
             if op.method.upper() == method and op.path and path
             and path_template_pattern(op.path, trailing_slash=True).match(path)}
    if not kinds:
        return f"{method} {path} is no operation of {destination}"
    candidates = intents.of(destination, tuple(sorted(kinds)))
    if len(candidates) == 1:
        return candidates[0], "route"
    if not candidates:
        return f"no intent asks for {', '.join(sorted(kinds))} on {destination}"
    return f"{method} {path} serves intents {named_intents(candidates)} alike"
