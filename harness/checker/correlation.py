"""The correlation of the three sources: the agent's log, the proxy journal, the effect ledger.

Correlation needs no harness header from the agent: each logged attempt is matched one-to-one to a
proxy journal entry of the same destination, in time order, preferring an exact ``traceparent``, then
the same idempotency key, then the same body fingerprint, each with the same method and path, and
last the same method and path where nothing contradicts. Journal entry <-> ledger row is exact
through ``flow_id``. A JSON-RPC flow (an MCP ``tools/call``: the journal's ``rpc``) is routed as
``(rpc.method, rpc.tool)``, not as the HTTP ``POST /mcp`` that carried it (``mcp_route``).
Ledger effects are attributed to operations through the matched flows, and
failing that through the idempotency key or client reference.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.checker.context import OperationContext


def ts_value(ts: Any) -> float:
    """Unix seconds from a float or an RFC 3339 string (unparseable -> 0.0, ordering then falls back to lines)."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def bare_path(path: Any) -> str | None:
    return path.split("?", 1)[0] if isinstance(path, str) else None


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
    request reached the destination but not what the client saw (``client_outcome`` None).
    """
    journal = sorted((mcp_route(e, destinations or {}) for e in journal_entries),
                     key=lambda e: (e.get("seq") or 0, e.get("_line") or 0))
    proxied = {e.get("destination") for e in journal}
    for row in sorted(requests, key=lambda r: r.get("seq") or 0):
        if row.get("destination") in proxied or row.get("flow_id"):
            continue
        journal.append({"seq": row.get("seq"), "flow_id": f"ledger:{row.get('seq')}", "ledger_seq": row.get("seq"),
                        "destination": row.get("destination"), "method": row.get("method"),
                        "path": row.get("path"), "idempotency_key": row.get("idempotency_key"),
                        "body_fingerprint": row.get("payload_fingerprint"), "traceparent": row.get("traceparent"),
                        "forwarded": True, "upstream_status": row.get("status"), "client_outcome": None,
                        "client_status": None, "ts_request": row.get("received_at"), "source": "ledger"})
    return journal


def correlate(ops: dict[str, OperationContext], journal_entries: list[dict[str, Any]],
              requests: list[dict[str, Any]], destinations: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Match each logged attempt to one wire record (``op.wire``); returns the wire records no attempt
    explains."""
    journal = wire_records(journal_entries, requests, destinations)
    used: set[int] = set()
    pairs = [(op, a) for op in ops.values() for a in op.attempts]
    pairs.sort(key=lambda p: (ts_value(p[1].get("ts")), p[1].get("_line") or 0))
    sent = [p for p in pairs if p[1].get("dispatch_state") != "not_sent"]
    not_sent = [p for p in pairs if p[1].get("dispatch_state") == "not_sent"]

    def same_route(attempt: dict[str, Any], entry: dict[str, Any]) -> bool:
        method, path = attempt.get("method"), bare_path(attempt.get("path"))
        return ((not method or method.upper() == str(entry.get("method", "")).upper())
                and (not path or path == bare_path(entry.get("path"))))

    def by_trace(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return bool(a.get("traceparent")) and a.get("traceparent") == e.get("traceparent")

    def by_key(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return (bool(a.get("idempotency_key")) and a.get("idempotency_key") == e.get("idempotency_key")
                and same_route(a, e))

    def by_fingerprint(a: dict[str, Any], e: dict[str, Any]) -> bool:
        return (bool(a.get("request_fingerprint")) and a.get("request_fingerprint") == e.get("body_fingerprint")
                and same_route(a, e))

    def by_route(a: dict[str, Any], e: dict[str, Any]) -> bool:
        if not (a.get("method") and a.get("path")) or not same_route(a, e):
            return False
        for mine, theirs in (("idempotency_key", "idempotency_key"), ("request_fingerprint", "body_fingerprint"),
                             ("traceparent", "traceparent")):
            if a.get(mine) and e.get(theirs) and a.get(mine) != e.get(theirs):
                return False
        return True

    for group in (sent, not_sent):
        for predicate in (by_trace, by_key, by_fingerprint, by_route):
            for op, attempt in group:
                if attempt["attempt_id"] in op.wire:
                    continue
                destination = attempt.get("destination") or op.destination
                for index, entry in enumerate(journal):
                    if index in used:
                        continue
                    if destination and entry.get("destination") and entry.get("destination") != destination:
                        continue
                    if predicate(attempt, entry):
                        used.add(index)
                        op.wire[attempt["attempt_id"]] = entry
                        break
    return [e for i, e in enumerate(journal) if i not in used]


def correlate_observations(ops: dict[str, OperationContext], leftover: list[dict[str, Any]],
                           crashes: tuple[float, ...] = ()) -> None:
    """Match each logged observation to the read that carried it (``op.observed``): among the journal
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
    pending = [(op, o) for op in ops.values() for o in op.observations if o.get("method") and o.get("path")]
    pending.sort(key=lambda p: (ts_value(p[1].get("ts")), p[1].get("_line") or 0))
    for op, obs in pending:
        key = (op.destination, str(obs["method"]).upper(), bare_path(obs["path"]))
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
        op.observed[obs["observation_id"]] = entry


def crashed_between(start: Any, end: Any, crashes: tuple[float, ...]) -> bool:
    """A planned crash (``crashes``, wall clock) fell between ``start`` and ``end`` (floats or RFC 3339);
    False when either is unknown."""
    if start is None or end is None or not ts_value(end):
        return False
    return any(ts_value(start) <= crash <= ts_value(end) for crash in crashes)


def attribute_ledger(ops: dict[str, OperationContext], requests: list[dict[str, Any]],
                     effects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each operation its ledger request rows and effects; returns the effects no operation owns."""
    unattributed: list[dict[str, Any]] = []
    flow_owner: dict[str, OperationContext] = {}
    for op in ops.values():
        for _attempt_id, entry in op.wire.items():
            if entry.get("flow_id"):
                flow_owner[entry["flow_id"]] = op
    for row in requests:
        flow = row.get("flow_id") or f"ledger:{row.get('seq')}"
        owner = flow_owner.get(flow)
        if owner is not None:
            owner.ledger_requests.setdefault(flow, []).append(row)
    key_owner: dict[tuple[str | None, str], OperationContext] = {}
    ref_owner: dict[str, OperationContext] = {}
    for op in ops.values():
        for attempt in op.attempts:
            if attempt.get("idempotency_key"):
                key_owner.setdefault((op.destination, attempt["idempotency_key"]), op)
        key = (op.operation or {}).get("idempotency_key")
        if key:
            key_owner.setdefault((op.destination, key), op)
        for candidate in (op.operation_id, op.intent_id):
            if candidate:
                ref_owner.setdefault(candidate, op)
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
            owner.ledger_effects.append(row)
    return unattributed
