"""The correlation of the three sources: the agent's log, the proxy journal, the effect ledger.

Correlation needs no harness header from the agent: each logged attempt is matched one-to-one to a
proxy journal entry of the same destination, in time order, preferring an exact ``traceparent``, then
the same idempotency key, then the same body fingerprint, each with the same method and path, and
last the same method and path where nothing contradicts. Journal entry <-> ledger row is exact
through ``flow_id``. A JSON-RPC flow (an MCP ``tools/call``: the journal's ``rpc``) is routed as
``(rpc.method, rpc.tool)``, not as the HTTP ``POST /mcp`` that carried it (``mcp_route``).
Ledger effects are attributed to operations through the matched flows, and
failing that through the idempotency key or client reference.

``correlate`` returns all of it as a value (``Correlation``), changing no operation: the checker's operations
read their part of it (``RunContext``), the HTML report and ``reproduce`` read it whole (``correlation_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.checker.readings import bare_path, crashed_between, ts_value

if TYPE_CHECKING:
    from harness.checker.context import OperationContext
    from harness.evidence import Evidence

Record = dict[str, Any]


@dataclass
class Correlation:
    """The three sources tied together, per operation id: each attempt's wire record (``wire``: attempt id ->
    record), each observation's read (``observed``: observation id -> journal entry), the ledger's request rows
    (per flow id) and effects; and what no attempt explains and no operation owns."""

    wire: dict[str, dict[str, Record]] = field(default_factory=dict)
    observed: dict[str, dict[str, Record]] = field(default_factory=dict)
    ledger_requests: dict[str, dict[str, list[Record]]] = field(default_factory=dict)
    ledger_effects: dict[str, list[Record]] = field(default_factory=dict)
    unmatched_wire: list[Record] = field(default_factory=list)
    unattributed_effects: list[Record] = field(default_factory=list)

    def flows_of(self, operation_id: str) -> list[Record]:
        """The wire records of one operation: its attempts' and its observations' reads."""
        return [*self.wire.get(operation_id, {}).values(), *self.observed.get(operation_id, {}).values()]


def correlate(ops: dict[str, OperationContext], evidence: Evidence, crashes: tuple[float, ...] = ()) -> Correlation:
    """The run's correlation (``Correlation``) of its operations ``ops`` (keyed by operation id) with the journal
    and the ledger of ``evidence``; ``crashes``: when the harness killed the agent (``correlate_observations``)."""
    wire, leftover = match_attempts(ops, evidence.journal, evidence.requests, evidence.destinations)
    observed = correlate_observations(ops, leftover, crashes)
    requests, effects, unattributed = attribute_ledger(ops, wire, evidence.requests, evidence.effects, observed)
    return Correlation(wire, observed, requests, effects, leftover, unattributed)


RPC_TOOL_CALL = "tools/call"  # the one JSON-RPC method of MCP that may act; the others are protocol


def tool_has_effect(destinations: dict[str, Any], destination: Any, tool: Any) -> bool:
    """Whether a ``tools/call`` of ``tool`` may commit an effect: its destination's spec says (a tool
    without ``effect`` acts on nothing, a lookup tool reads); a tool the spec does not know is taken as a
    write, unless the contract names it as the lookup."""
    entry = destinations.get(str(destination))
    if not isinstance(entry, dict):
        return True
    spec, contract = entry.get("spec"), entry.get("contract")
    tools = spec.get("tools") if isinstance(spec, dict) else None
    if isinstance(tools, dict) and isinstance(tools.get(tool), dict):
        declared = tools[tool]
        return bool(declared.get("effect")) and not declared.get("lookup")
    lookup = contract.get("lookup") if isinstance(contract, dict) else None
    return not (isinstance(lookup, dict) and lookup.get("path") == tool)


def tool_annotations(contract: Any, spec: Any, tool: Any) -> dict[str, Any]:
    """The annotations an MCP destination publishes for a tool in ``tools/list``: its contract's
    ``operations.<tool>.annotations`` (a dict, or the typed contract's attribute), else its spec's
    ``tools.<tool>.annotations``; ``{}`` when none. Hints from the server, never policy."""
    if isinstance(contract, dict):
        declared = (contract.get("operations") or {}).get(tool)
        found = declared.get("annotations") if isinstance(declared, dict) else None
    else:
        operations = getattr(contract, "operations", None) or {}
        found = getattr(operations.get(tool), "annotations", None)
    if isinstance(found, dict) and found:
        return found
    tools = spec.get("tools") if isinstance(spec, dict) else None
    declared = tools.get(tool) if isinstance(tools, dict) else None
    found = declared.get("annotations") if isinstance(declared, dict) else None
    return found if isinstance(found, dict) else {}


def mcp_route(entry: dict[str, Any], destinations: dict[str, Any]) -> dict[str, Any]:
    """A journal entry of a JSON-RPC message routed as the checker reads it: ``method`` = the JSON-RPC
    method, ``path`` = the tool of a ``tools/call`` (else the HTTP path), ``read`` = a protocol message or a
    call of a tool without effect (never an attempt), ``tool_error`` = the client got an error result. The
    HTTP method and path stay in ``http_method``/``http_path``. Other entries are returned as they are."""
    rpc = entry.get("rpc")
    if not isinstance(rpc, dict) or not rpc.get("method"):
        return entry
    method, tool = str(rpc["method"]), rpc.get("tool")
    routed = dict(entry, http_method=entry.get("method"), http_path=entry.get("path"), method=method,
                  path=tool if method == RPC_TOOL_CALL and tool else entry.get("path"),
                  tool_error=rpc.get("is_error") is True)
    routed["read"] = method != RPC_TOOL_CALL or not tool_has_effect(destinations, entry.get("destination"), tool)
    return routed


def wire_records(journal_entries: list[dict[str, Any]], requests: list[dict[str, Any]],
                 destinations: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The journal (JSON-RPC entries routed by ``mcp_route``), plus the ledger's request rows of destinations
    the proxy does not front (SSH).

    Such a row stands in for a journal entry with ``flow_id`` ``ledger:<seq>``; it proves the
    request reached the destination but not what the client saw (``client_outcome`` None), unless the host's
    spec dropped that command's connection after running it (``connection_closed``).
    """
    journal = sorted((mcp_route(e, destinations or {}) for e in journal_entries),
                     key=lambda e: (e.get("seq") or 0, e.get("_line") or 0))
    proxied = {e.get("destination") for e in journal}
    dropped, commands = _dropped_commands(destinations or {}), dict[str, int]()
    for row in sorted(requests, key=lambda r: r.get("seq") or 0):
        if row.get("destination") in proxied or row.get("flow_id"):
            continue
        number = commands[str(row.get("destination"))] = commands.get(str(row.get("destination")), 0) + 1
        journal.append({"seq": row.get("seq"), "flow_id": f"ledger:{row.get('seq')}", "ledger_seq": row.get("seq"),
                        "destination": row.get("destination"), "method": row.get("method"),
                        "path": row.get("path"), "idempotency_key": row.get("idempotency_key"),
                        "body_fingerprint": row.get("payload_fingerprint"), "traceparent": row.get("traceparent"),
                        "forwarded": True, "upstream_status": row.get("status"),
                        "client_outcome": "connection_closed" if number in dropped.get(str(row.get("destination")),
                                                                                       ()) else None,
                        "client_status": None, "ts_request": row.get("received_at"), "source": "ledger"})
    return journal


def _dropped_commands(destinations: dict[str, Any]) -> dict[str, frozenset[int]]:
    """Per SSH host, the commands (numbered from 1 in the order it received them, as its spec counts them) that it
    ran and then dropped the connection of (``drop_after_exec``): their client never got an exit status."""
    dropped: dict[str, frozenset[int]] = {}
    for name, entry in destinations.items():
        spec = entry.get("spec") if isinstance(entry, dict) else None
        failures = spec.get("failures") if isinstance(spec, dict) else None
        numbers = frozenset(f["at"] for f in failures or () if isinstance(f, dict)
                            and f.get("fault") == "drop_after_exec" and isinstance(f.get("at"), int))
        if numbers:
            dropped[name] = numbers
    return dropped


def match_attempts(ops: dict[str, OperationContext], journal_entries: list[dict[str, Any]],
                   requests: list[dict[str, Any]], destinations: dict[str, Any] | None = None,
                   ) -> tuple[dict[str, dict[str, Record]], list[Record]]:
    """Match each logged attempt to one wire record: ``({operation id: {attempt id: record}}, the wire records
    no attempt explains)``.

    Greedy, in this order: sent attempts before ``not_sent`` ones; within each group the four passes
    (traceparent, key, fingerprint, route); within a pass the attempts in time order, each taking the
    first wire record (in journal order) not yet taken that its pass accepts. The records are indexed
    per pass (``_WireIndex``), so this is linear in attempts and records, but for the sorts."""
    journal = wire_records(journal_entries, requests, destinations)
    used = bytearray(len(journal))
    wire: dict[str, dict[str, Record]] = {op_id: {} for op_id in ops}
    pairs = [(wire[op_id], op, a) for op_id, op in ops.items() for a in op.attempts]
    pairs.sort(key=lambda p: (ts_value(p[2].get("ts")), p[2].get("_line") or 0))
    sent = [p for p in pairs if p[2].get("dispatch_state") != "not_sent"]
    not_sent = [p for p in pairs if p[2].get("dispatch_state") == "not_sent"]
    passes = [_WireIndex(journal, used, name) for name in _PASSES]
    for group in (sent, not_sent):
        for index in passes:
            for matched, op, attempt in group:
                if attempt["attempt_id"] in matched:
                    continue
                found = index.take(attempt, attempt.get("destination") or op.destination)
                if found is not None:
                    matched[attempt["attempt_id"]] = journal[found]
    return wire, [e for i, e in enumerate(journal) if not used[i]]


# The passes of ``match_attempts``, each as the dimensions a wire record is compared on, with how:
#   "equal": the attempt's value must be set, and the record's equal to it (traceparent, key, fingerprint);
#   "route": the attempt's method / path, when it has one, must be the record's (``same_route``);
#   "open": the attempt's value, when set, must be the record's unless the record has none (the destination,
#           and the last pass's key, fingerprint and traceparent: nothing may contradict).
# Each dimension: (attempt field, record field, how).
_Dim = tuple[str, str, str]
_ROUTE: tuple[_Dim, ...] = (("method", "method", "route"), ("path", "path", "route"))
_PASSES: dict[str, tuple[_Dim, ...]] = {
    # a traceparent names a trace, not one request: an agent may send it on every request of an operation
    # (a lookup before the write, an MCP session's initialize before its tools/call), so the route holds too
    "trace": (("traceparent", "traceparent", "equal"), *_ROUTE),
    "key": (("idempotency_key", "idempotency_key", "equal"), *_ROUTE),
    "fingerprint": (("request_fingerprint", "body_fingerprint", "equal"), *_ROUTE),
    "route": (*_ROUTE, ("idempotency_key", "idempotency_key", "open"),
              ("request_fingerprint", "body_fingerprint", "open"), ("traceparent", "traceparent", "open")),
}
_ANY = object()  # a record without a value on an "open" dimension: it contradicts no attempt
_WILD = object()  # an attempt without a value on a "route" or "open" dimension: any record's value will do


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a JSON value that compares as the value does (a journal is hand-writable)."""
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class _WireIndex:
    """One pass of ``match_attempts``: the wire records bucketed on the dimensions the pass compares, so that the
    first record not yet taken that accepts an attempt is found without scanning the journal.

    An attempt leaves some dimensions open (no method, no destination...): the records are bucketed once per
    such shape of attempt, when the first one comes. A bucket lists its records in journal order, with a head
    that only moves forward past taken ones (a record, once taken, is never given back)."""

    def __init__(self, journal: list[dict[str, Any]], used: bytearray, name: str) -> None:
        self.journal, self.used = journal, used
        self.dims: tuple[_Dim, ...] = (("destination", "destination", "open"), *_PASSES[name])
        self.route_required = name == "route"  # the last pass needs the attempt's method and path
        self.shapes: dict[tuple[bool, ...], dict[tuple[Any, ...], list[int]]] = {}
        self.heads: dict[tuple[tuple[bool, ...], tuple[Any, ...]], int] = {}
        self.entry_values = [tuple(self._entry_value(e, d) for d in self.dims) for e in journal]

    @staticmethod
    def _entry_value(entry: dict[str, Any], dim: _Dim) -> Any:
        _, field, how = dim
        if field == "method":
            return str(entry.get("method", "")).upper()
        if field == "path":
            return bare_path(entry.get("path"))
        value = entry.get(field)
        if how == "open" and not value:
            return _ANY
        return _frozen(value)

    def _attempt_value(self, attempt: dict[str, Any], destination: Any, dim: _Dim) -> Any:
        field, _, how = dim
        if field == "destination":
            value = destination
        elif field == "method":
            value = attempt.get("method")
            value = value.upper() if value else None
        elif field == "path":
            value = bare_path(attempt.get("path"))
        else:
            value = attempt.get(field)
        if how == "equal":
            return _frozen(value) if value else None  # None: the pass cannot match this attempt
        return _frozen(value) if value else _WILD

    def take(self, attempt: dict[str, Any], destination: Any) -> int | None:
        """The first record not yet taken that this pass accepts for ``attempt``, now taken; None if none."""
        if self.route_required and not (attempt.get("method") and attempt.get("path")):
            return None
        wanted = [self._attempt_value(attempt, destination, d) for d in self.dims]
        if any(w is None for w in wanted):
            return None
        shape = tuple(w is not _WILD for w in wanted)
        buckets = self.shapes.get(shape)
        if buckets is None:
            buckets = self.shapes[shape] = {}
            for i, values in enumerate(self.entry_values):
                buckets.setdefault(tuple(v for v, kept in zip(values, shape, strict=True) if kept), []).append(i)
        keys: list[tuple[Any, ...]] = [()]
        for w, (_, _, how) in zip(wanted, self.dims, strict=True):
            if w is _WILD:
                continue
            options = (w, _ANY) if how == "open" else (w,)
            keys = [k + (o,) for k in keys for o in options]
        best: tuple[int, tuple[tuple[bool, ...], tuple[Any, ...]]] | None = None
        for key in keys:
            bucket = buckets.get(key)
            if not bucket:
                continue
            head = self.heads.get((shape, key), 0)
            while head < len(bucket) and self.used[bucket[head]]:
                head += 1
            self.heads[(shape, key)] = head
            if head < len(bucket) and (best is None or bucket[head] < best[0]):
                best = (bucket[head], (shape, key))
        if best is None:
            return None
        self.used[best[0]] = 1
        return best[0]


def read_of(op: OperationContext, obs: dict[str, Any]) -> tuple[str, str] | None:
    """The read an observation rests on: the method and path it logged, else, for a lookup (the contract's
    minimal agents log none), the destination's lookup as its contract gives it; None when nothing says."""
    if obs.get("method") and obs.get("path"):
        return str(obs["method"]), str(obs["path"])
    lookup = op.contract.lookup if op.contract is not None else None
    if (obs.get("source") or "lookup") == "lookup" and lookup is not None:
        return lookup.method, lookup.path
    return None


def correlate_observations(ops: dict[str, OperationContext], leftover: list[dict[str, Any]],
                           crashes: tuple[float, ...] = ()) -> dict[str, dict[str, Record]]:
    """Match each logged observation to the read that carried it (``{operation id: {observation id: journal
    entry}}``): among the journal
    entries no attempt explains, the next one sent to the operation's destination with the observation's
    method and path, observations in time order (a held read ends after the next one: the journal,
    written on completion, is not the order of sending). Linear in events and flows, but for the sort.
    A read sent before a planned crash (``crashes``) is no read of an observation logged after it: the
    killed run never logged it.

    An observation is logged once its read is answered, so a flow that went out after the observation
    was written is not its read (it stays for a later one)."""
    queues: dict[tuple[Any, str, str | None], list[dict[str, Any]]] = {}
    for entry in leftover:
        if entry.get("source", "journal") != "journal":
            continue  # a ledger stand-in (a destination the proxy does not front) carries no lookup
        queues.setdefault((entry.get("destination"), str(entry.get("method") or "").upper(),
                           bare_path(entry.get("path"))), []).append(entry)
    for sending in queues.values():  # the journal is in order of completion; reads go out in order of sending
        sending.sort(key=lambda e: (ts_value(e["ts_request"]) if e.get("ts_request") is not None else 0.0))
    heads = dict.fromkeys(queues, 0)
    observed: dict[str, dict[str, Record]] = {op_id: {} for op_id in ops}
    pending = [(op_id, op, o, read) for op_id, op in ops.items() for o in op.observations
               if (read := read_of(op, o)) is not None]
    pending.sort(key=lambda p: (ts_value(p[2].get("ts")), p[2].get("_line") or 0))
    for op_id, op, obs, (method, path) in pending:
        key = (op.destination, method.upper(), bare_path(path))
        queue = queues.get(key)
        logged_at = ts_value(obs.get("ts"))
        while queue and heads[key] < len(queue) and \
                crashed_between(queue[heads[key]].get("ts_request"), obs.get("ts"), crashes):
            heads[key] += 1  # a read the killed run sent and never logged
        if not queue or heads[key] >= len(queue):
            continue
        entry = queue[heads[key]]
        if logged_at and entry.get("ts_request") is not None and ts_value(entry["ts_request"]) > logged_at + 0.5:
            continue  # the next read went out after this observation was written: not its read
        heads[key] += 1
        observed[op_id][obs["observation_id"]] = entry
    return observed


def attribute_ledger(ops: dict[str, OperationContext], wire: dict[str, dict[str, Record]],
                     requests: list[dict[str, Any]], effects: list[dict[str, Any]],
                     observed: dict[str, dict[str, Record]] | None = None,
                     ) -> tuple[dict[str, dict[str, list[Record]]], dict[str, list[Record]], list[Record]]:
    """Each operation's ledger request rows (per flow id) and effects, given its attempts' ``wire`` records
    (``match_attempts``) and its observations' reads (``observed``: what the destination answered a poll):
    ``(requests, effects, the effects no operation owns)``, keyed by operation id."""
    unattributed: list[dict[str, Any]] = []
    owned_requests: dict[str, dict[str, list[Record]]] = {op_id: {} for op_id in ops}
    owned_effects: dict[str, list[Record]] = {op_id: [] for op_id in ops}
    flow_owner: dict[str, str] = {}
    for op_id in ops:
        for entry in wire.get(op_id, {}).values():
            if entry.get("flow_id"):
                flow_owner[entry["flow_id"]] = op_id
        for entry in (observed or {}).get(op_id, {}).values():
            if entry.get("flow_id"):
                flow_owner.setdefault(entry["flow_id"], op_id)
    for row in requests:
        flow = row.get("flow_id") or f"ledger:{row.get('seq')}"
        owner = flow_owner.get(flow)
        if owner is not None:
            owned_requests[owner].setdefault(flow, []).append(row)
    key_owner: dict[tuple[str | None, str], str] = {}
    ref_owner: dict[str, str] = {}
    for op_id, op in ops.items():
        for attempt in op.attempts:
            if attempt.get("idempotency_key"):
                key_owner.setdefault((op.destination, attempt["idempotency_key"]), op_id)
        key = (op.operation or {}).get("idempotency_key")
        if key:
            key_owner.setdefault((op.destination, key), op_id)
        for candidate in (op.operation_id, op.intent_id):
            if candidate:
                ref_owner.setdefault(candidate, op_id)
    for row in effects:
        owner = flow_owner.get(row.get("flow_id") or f"ledger:{row.get('request_seq')}")
        if owner is None and row.get("operation_key"):
            owner = (key_owner.get((row.get("destination"), row["operation_key"]))
                     or key_owner.get((None, row["operation_key"])))
        if owner is None and row.get("client_reference"):
            owner = ref_owner.get(row["client_reference"])
        if owner is None:
            unattributed.append(row)
        else:
            owned_effects[owner].append(row)
    return owned_requests, owned_effects, unattributed
