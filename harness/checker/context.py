"""Per-operation views of the evidence, and the correlation of the agent's log with the wire.

Correlation needs no harness header from the agent: each logged attempt is matched one-to-one to a
proxy journal entry of the same destination, in time order, preferring an exact ``traceparent``, then
the same idempotency key, then the same body fingerprint, each with the same method and path, and
last the same method and path where nothing contradicts. Journal entry <-> ledger row is exact
through ``flow_id``. Ledger effects are attributed to operations through the matched flows, and
failing that through the idempotency key or client reference.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from harness.evidence import Evidence

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
SENT_STATES = frozenset({"sent_no_response", "response_received"})
# Ledger request outcomes that name an effect the destination holds.
EFFECT_OUTCOMES = frozenset({"committed", "replayed", "accepted_async", "failed_after_commit"})


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


def log_ref(record: dict[str, Any]) -> dict[str, Any]:
    """Evidence pointer to an audit log line."""
    ref: dict[str, Any] = {"source": "log", "line": record.get("_line"), "event": record.get("event")}
    for key in ("attempt_id", "observation_id", "approval_id", "state", "dispatch_state", "idempotency_key"):
        if record.get(key) is not None:
            ref[key] = record[key]
    return ref


def wire_ref(entry: dict[str, Any]) -> dict[str, Any]:
    """Evidence pointer to a proxy journal entry."""
    return {"source": "journal", "line": entry.get("_line"), "seq": entry.get("seq"), "flow_id": entry.get("flow_id"),
            "method": entry.get("method"), "path": entry.get("path"), "idempotency_key": entry.get("idempotency_key"),
            "forwarded": entry.get("forwarded"), "client_outcome": entry.get("client_outcome"),
            "upstream_status": entry.get("upstream_status")}


def effect_ref_row(row: dict[str, Any]) -> dict[str, Any]:
    """Evidence pointer to a ledger effect row."""
    return {"source": "ledger", "table": "effects", "seq": row.get("seq"), "effect_ref": row.get("effect_ref"),
            "destination": row.get("destination"), "flow_id": row.get("flow_id"),
            "operation_key": row.get("operation_key")}


def wire_summary(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry.get(k) for k in ("flow_id", "seq", "forwarded", "upstream_status", "client_outcome",
                                      "client_status", "fault", "idempotency_key", "body_fingerprint")} | {
        "line": entry.get("_line"), "source": entry.get("source", "journal")}


class OperationContext:
    """Everything known about one operation: its events in log order, and (unless offline) the wire
    entries matched to its attempts and the ledger rows attributed to it."""

    # slots: the offline audit makes one per operation, hundreds of thousands on a long log
    __slots__ = ("operation_id", "format", "offline", "operations", "attempts", "_attempt_index", "observations",
                 "resolutions", "approvals", "log_effects", "wire", "ledger_effects", "ledger_requests", "contract",
                 "spec", "all_operation_ids", "peers", "_refs", "_fps")

    def __init__(self, operation_id: str, *, fmt: str = "events", offline: bool = True) -> None:
        self.operation_id = operation_id
        self.format = fmt  # "events" (ours) or "ledger" (the article's attempt/effect lines)
        self.offline = offline
        self.operations: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self._attempt_index: dict[str, int] = {}
        self.observations: list[dict[str, Any]] = []
        self.resolutions: list[dict[str, Any]] = []
        self.approvals: list[dict[str, Any]] = []
        self.log_effects: list[dict[str, Any]] = []  # article-format effect lines
        self.wire: dict[str, dict[str, Any]] = {}
        self.ledger_effects: list[dict[str, Any]] = []
        self.ledger_requests: dict[str, list[dict[str, Any]]] = {}
        self.contract: dict[str, Any] | None = None
        self.spec: dict[str, Any] | None = None
        self.all_operation_ids: frozenset[str] | set[str] | dict[str, Any] = frozenset()
        self.peers: dict[str, OperationContext] = {}  # other operations of the run (owner lookups)
        self._refs: list[str] | None = None  # caches, reset by add(); rules ask for these many times
        self._fps: dict[str, dict[str, list[dict[str, Any]]]] | None = None

    # -- building
    def add(self, record: dict[str, Any]) -> None:
        self._refs = self._fps = None
        kind = record.get("event")
        if kind == "attempt":
            attempt_id = record["attempt_id"]
            index = self._attempt_index.get(attempt_id)
            if index is None:
                self._attempt_index[attempt_id] = len(self.attempts)
                self.attempts.append(record)
            else:  # the same attempt logged again (e.g. before and after dispatch): last word wins
                merged = dict(self.attempts[index])
                merged.update({k: v for k, v in record.items() if v is not None})
                merged["_lines"] = self.attempts[index].get("_lines", [self.attempts[index].get("_line")]) + [record.get("_line")]
                self.attempts[index] = merged
        elif kind == "operation":
            self.operations.append(record)
        elif kind == "observation":
            self.observations.append(record)
        elif kind == "resolution":
            self.resolutions.append(record)
        elif kind == "approval":
            self.approvals.append(record)
        elif kind == "effect":
            self.log_effects.append(record)

    # -- derived facts
    @property
    def operation(self) -> dict[str, Any] | None:
        return self.operations[0] if self.operations else None

    @property
    def resolution(self) -> dict[str, Any] | None:
        return self.resolutions[-1] if self.resolutions else None

    @property
    def state(self) -> str:
        return self.resolution["state"] if self.resolution else "open"

    @property
    def intent_id(self) -> str | None:
        op = self.operation
        return op.get("intent_id") if op else None

    @property
    def intent(self) -> dict[str, Any] | None:
        op = self.operation
        return op.get("intent") if op else None

    @property
    def destination(self) -> str | None:
        intent = self.intent
        if isinstance(intent, dict) and intent.get("destination"):
            return intent["destination"]
        for attempt in self.attempts:
            if attempt.get("destination"):
                return attempt["destination"]
        return None

    def attempt(self, attempt_id: str | None) -> dict[str, Any] | None:
        index = self._attempt_index.get(attempt_id or "")
        return None if index is None else self.attempts[index]

    @property
    def evidence_ids(self) -> set[str]:
        ids = set(self._attempt_index)
        ids.update(o["observation_id"] for o in self.observations)
        ids.update(a["approval_id"] for a in self.approvals)
        return ids

    def takes_keys(self) -> bool | None:
        """Does the destination deduplicate on a key? None when unknown (offline, no contract).

        Either the whole destination does (``idempotency.style``), or this operation's kind does on
        its own (``operations[kind].dedup``, e.g. an SSH deploy's operation marker).
        """
        if self.contract is None:
            return None
        style = (self.contract.get("idempotency") or {}).get("style")
        if style and style != "none":
            return True
        kind = (self.intent or {}).get("kind") if isinstance(self.intent, dict) else None
        operation = ((self.contract.get("operations") or {}).get(kind or "") or {})
        return bool(isinstance(operation, dict) and operation.get("dedup"))

    def retention_seconds(self) -> float | None:
        value = (self.contract or {}).get("idempotency") or {}
        value = value.get("retention_seconds")
        return float(value) if isinstance(value, (int, float)) else None

    def is_unknown(self, attempt: dict[str, Any]) -> bool:
        """The attempt may have acted and the agent cannot know: logged so, or the wire shows it."""
        if attempt.get("dispatch_state") == "sent_no_response":
            return True
        entry = self.wire.get(attempt["attempt_id"])
        return bool(entry and entry.get("forwarded") and entry.get("client_outcome") not in ("response", None))

    def effect_refs(self) -> list[str]:
        """Distinct effect refs: the ledger's when judging a run, the log's when auditing offline."""
        if self._refs is None:
            self._refs = self._effect_refs()
        return self._refs

    def _effect_refs(self) -> list[str]:
        refs: dict[str, None] = {}
        if not self.offline:
            for row in self.ledger_effects:
                if row.get("effect_ref"):
                    refs[row["effect_ref"]] = None
            for rows in self.ledger_requests.values():
                for row in rows:
                    if row.get("effect_ref") and row.get("outcome") in EFFECT_OUTCOMES:
                        refs[row["effect_ref"]] = None
            return list(refs)
        for effect in self.log_effects:
            if effect.get("effect_ref"):
                refs[effect["effect_ref"]] = None
        for attempt in self.attempts:
            if attempt.get("dispatch_state") == "response_received":
                for ref in attempt.get("effect_refs") or ():
                    refs[ref] = None
        for obs in self.observations:
            if obs.get("found") is not False:
                for ref in obs.get("effect_refs") or ():
                    refs[ref] = None
        return list(refs)

    def key_fingerprints(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """key -> fingerprint -> evidence pointers (log lines and wire entries) that used them."""
        if self._fps is None:
            self._fps = self._key_fingerprints()
        return self._fps

    def _key_fingerprints(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        table: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for attempt in self.attempts:
            key = attempt.get("idempotency_key")
            fp = attempt.get("request_fingerprint")
            if key and fp:
                table[key][fp].append(log_ref(attempt))
            entry = self.wire.get(attempt["attempt_id"])
            if entry and entry.get("idempotency_key") and entry.get("body_fingerprint"):
                table[entry["idempotency_key"]][entry["body_fingerprint"]].append(wire_ref(entry))
        return table

    def key_conflict(self) -> bool:
        return any(len(fps) > 1 for fps in self.key_fingerprints().values())

    def absence_proven(self) -> bool:
        """Zero effects is proof of absence only from the ledger, or when nothing left the machine."""
        if not self.offline:
            return True
        if self.attempts and all(a.get("dispatch_state") == "not_sent" for a in self.attempts):
            return True
        return any(o.get("found") is False and o.get("lag_possible") is False for o in self.observations)

    def classify(self) -> str:
        """The second article's classes: key conflict first, then count distinct effect refs."""
        if self.key_conflict():
            return "key_conflict"
        count = len(self.effect_refs())
        if count > 1:
            return "duplicate"
        if count == 1 or self.absence_proven():
            return "healthy"
        return "uncertain"

    def ordered_events(self) -> list[dict[str, Any]]:
        events = self.operations + self.attempts + self.observations + self.resolutions + self.approvals
        return sorted(events, key=lambda r: r.get("_line") or 0)


class RunContext:
    """The whole run: operations in first-seen order, and what the wire held that no attempt explains."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.offline = not evidence.has_wire
        self.ops: dict[str, OperationContext] = {}
        for record in evidence.events:
            op = self.ops.get(record["operation_id"])
            if op is None:
                op = self.ops[record["operation_id"]] = OperationContext(record["operation_id"], offline=self.offline)
            op.add(record)
        ids = set(self.ops)
        for op in self.ops.values():
            op.all_operation_ids = ids
            op.peers = self.ops
            entry = evidence.destinations.get(op.destination or "")
            if isinstance(entry, dict):
                op.contract = entry.get("contract")
                op.spec = entry.get("spec")
        self.unmatched_wire: list[dict[str, Any]] = []
        self.unattributed_effects: list[dict[str, Any]] = []
        if not self.offline:
            self._correlate()
            self._attribute_ledger()

    # -- log <-> wire
    def _wire_records(self) -> list[dict[str, Any]]:
        """The journal, plus the ledger's request rows of destinations the proxy does not front (SSH).

        Such a row stands in for a journal entry with ``flow_id`` ``ledger:<seq>``; it proves the
        request reached the destination but not what the client saw (``client_outcome`` None).
        """
        journal = sorted(self.evidence.journal, key=lambda e: (e.get("seq") or 0, e.get("_line") or 0))
        proxied = {e.get("destination") for e in journal}
        for row in sorted(self.evidence.requests, key=lambda r: r.get("seq") or 0):
            if row.get("destination") in proxied or row.get("flow_id"):
                continue
            journal.append({"seq": row.get("seq"), "flow_id": f"ledger:{row.get('seq')}", "ledger_seq": row.get("seq"),
                            "destination": row.get("destination"), "method": row.get("method"),
                            "path": row.get("path"), "idempotency_key": row.get("idempotency_key"),
                            "body_fingerprint": row.get("payload_fingerprint"), "traceparent": row.get("traceparent"),
                            "forwarded": True, "upstream_status": row.get("status"), "client_outcome": None,
                            "client_status": None, "ts_request": row.get("received_at"), "source": "ledger"})
        return journal

    def _correlate(self) -> None:
        journal = self._wire_records()
        used: set[int] = set()
        pairs = [(op, a) for op in self.ops.values() for a in op.attempts]
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
            return bool(a.get("idempotency_key")) and a.get("idempotency_key") == e.get("idempotency_key") and same_route(a, e)

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
        self.unmatched_wire = [e for i, e in enumerate(journal) if i not in used]

    # -- wire <-> ledger
    def _attribute_ledger(self) -> None:
        flow_owner: dict[str, OperationContext] = {}
        for op in self.ops.values():
            for attempt_id, entry in op.wire.items():
                if entry.get("flow_id"):
                    flow_owner[entry["flow_id"]] = op
        for row in self.evidence.requests:
            flow = row.get("flow_id") or f"ledger:{row.get('seq')}"
            op = flow_owner.get(flow)
            if op is not None:
                op.ledger_requests.setdefault(flow, []).append(row)
        key_owner: dict[tuple[str | None, str], OperationContext] = {}
        ref_owner: dict[str, OperationContext] = {}
        for op in self.ops.values():
            for attempt in op.attempts:
                if attempt.get("idempotency_key"):
                    key_owner.setdefault((op.destination, attempt["idempotency_key"]), op)
            key = (op.operation or {}).get("idempotency_key")
            if key:
                key_owner.setdefault((op.destination, key), op)
            for candidate in (op.operation_id, op.intent_id):
                if candidate:
                    ref_owner.setdefault(candidate, op)
        for row in self.evidence.effects:
            op = flow_owner.get(row.get("flow_id") or f"ledger:{row.get('request_seq')}")
            if op is None and row.get("operation_key"):
                op = key_owner.get((row.get("destination"), row["operation_key"])) or key_owner.get((None, row["operation_key"]))
            if op is None and row.get("client_reference"):
                op = ref_owner.get(row["client_reference"])
            if op is None:
                self.unattributed_effects.append(row)
            else:
                op.ledger_effects.append(row)
