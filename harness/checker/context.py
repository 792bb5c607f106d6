"""Per-operation views of the evidence (``OperationContext``), and the evidence pointers findings carry.

The whole run's view is ``harness.checker.run_context.RunContext``, which ties each operation's attempts to the
wire and the ledger (``harness.checker.correlation``); the rules read only these views.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container
from typing import Any

from harness.checker.readings import crashed_between, ts_value
from harness.contract import DestinationContract
from harness.evidence import Evidence

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
SENT_STATES = frozenset({"sent_no_response", "response_received"})
# Ledger request outcomes that name an effect the destination holds.
EFFECT_OUTCOMES = frozenset({"committed", "replayed", "accepted_async", "failed_after_commit"})


def is_read(entry: dict[str, Any]) -> bool:
    """A wire record that cannot act: a safe HTTP method, or a JSON-RPC message that is protocol or a call
    of a tool without effect (``correlation.mcp_route``)."""
    return bool(entry.get("read")) or str(entry.get("method", "")).upper() in SAFE_METHODS


def tool_error(op: OperationContext, attempt: dict[str, Any]) -> bool:
    """The attempt got an MCP error result (``isError: true``): the wire's word where it is matched, else the
    log's. Like a 5xx, it says the call failed, not that the tool did not commit first."""
    entry = op.wire.get(attempt.get("attempt_id") or "")
    if entry is not None and "tool_error" in entry:
        return bool(entry["tool_error"])
    return attempt.get("tool_error") is True and attempt.get("dispatch_state") == "response_received"


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


def request_ref_row(row: dict[str, Any]) -> dict[str, Any]:
    """Evidence pointer to a ledger request row (what a destination received)."""
    return {"source": "ledger", "table": "requests", "seq": row.get("seq"), "destination": row.get("destination"),
            "method": row.get("method"), "path": row.get("path"), "flow_id": row.get("flow_id"),
            "outcome": row.get("outcome"), "effect_ref": row.get("effect_ref")}


def bypassed(evidence: Evidence) -> list[dict[str, Any]]:
    """The ledger's requests that reached a destination the fault proxy fronts without crossing it: no flow
    the proxy stamped (it stamps every request it forwards, over whatever the client sent), or one its
    journal never saw (a stamp forged by the client). SSH hosts are not proxied: their rows are the wire.

    A request that did not come through the proxy (refused at the gate, or with no flow) is the agent's only when
    the destination could tell the agent sent it (its ``sender``, ``fake_destinations.peer``): one from another
    process of the machine (a neighbour probing ports), or from a process it could not tell, is not attributable,
    so no finding against the agent. A ledger from before ``sender`` (no such key) is read as it was then."""
    flows = {e.get("flow_id") for e in evidence.journal if e.get("flow_id")}
    unproxied = {name for name, entry in evidence.destinations.items()
                 if isinstance(entry, dict) and isinstance(entry.get("spec"), dict)
                 and entry["spec"].get("service") == "ssh"}
    return [row for row in evidence.requests if row.get("destination") not in unproxied
            and str(row.get("method") or "").upper() != "EXEC" and row.get("flow_id") not in flows
            and sent_by_agent(row)]


def sent_by_agent(row: dict[str, Any]) -> bool:
    """Whether a request that did not cross the proxy can be laid at the agent's door (``bypassed``, H062)."""
    if "sender" not in row:  # a ledger from before sender
        return True
    if row["sender"] is not None:
        return bool(row["sender"] == "agent")
    # not told: a request that passed the gate with a flow is the proxy's own (a line its journal lost); any
    # other is not attributable
    return row.get("flow_id") is not None and row.get("outcome") != "rejected"


def wire_summary(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry.get(k) for k in ("flow_id", "seq", "forwarded", "upstream_status", "client_outcome",
                                      "client_status", "fault", "idempotency_key", "body_fingerprint")} | {
        "line": entry.get("_line"), "source": entry.get("source", "journal")}


class OperationContext:
    """Everything known about one operation: its events in log order, and (unless offline) the wire
    entries matched to its attempts and the ledger rows attributed to it."""

    # slots: the offline audit makes one per operation, hundreds of thousands on a long log
    __slots__ = ("operation_id", "format", "offline", "operations", "attempts", "attempt_index", "observations",
                 "resolutions", "approvals", "log_effects", "wire", "observed", "ledger_effects", "ledger_requests",
                 "contract", "spec", "all_operation_ids", "peers", "run_intent", "crashes", "reused_sessions", "_refs",
                 "_fps", "history", "replayed")

    def __init__(self, operation_id: str, *, fmt: str = "events", offline: bool = True) -> None:
        self.operation_id = operation_id
        self.format = fmt  # "events" (ours) or "ledger" (the article's attempt/effect lines)
        self.offline = offline
        self.operations: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.attempt_index: dict[str, int] = {}
        self.observations: list[dict[str, Any]] = []
        self.resolutions: list[dict[str, Any]] = []
        self.approvals: list[dict[str, Any]] = []
        self.log_effects: list[dict[str, Any]] = []  # article-format effect lines
        self.wire: dict[str, dict[str, Any]] = {}  # attempt id -> its journal entry
        self.observed: dict[str, dict[str, Any]] = {}  # observation id -> the read's journal entry
        self.ledger_effects: list[dict[str, Any]] = []
        self.ledger_requests: dict[str, list[dict[str, Any]]] = {}
        self.contract: DestinationContract | None = None
        self.spec: dict[str, Any] | None = None
        # what ``in`` answers for: the run's operation ids, or the streaming audit's open and judged ones
        self.all_operation_ids: Container[str] = frozenset()
        self.peers: dict[str, OperationContext] = {}  # other operations of the run (owner lookups)
        self.run_intent: dict[str, Any] | None = None  # the intents file's intent this operation declares
        self.crashes: tuple[float, ...] = ()  # when the harness killed the agent (planned crashes), wall clock
        # a killed, sandboxed run's session a later process wrote under (``Evidence.reused_sessions``)
        self.reused_sessions: dict[str, dict[str, Any]] = {}
        self._refs: list[str] | None = None  # caches, reset by add(); rules ask for these many times
        self._fps: dict[str, dict[str, list[dict[str, Any]]]] | None = None
        self.history: list[dict[str, Any]] = []  # every record as logged, in line order (the model replays it)
        self.replayed: Any = None  # harness.checker.history.replay's result, once asked

    # -- building
    def add(self, record: dict[str, Any]) -> None:
        self._refs = self._fps = self.replayed = None
        self.history.append(record)
        kind = record.get("event")
        if kind == "attempt":
            attempt_id = record["attempt_id"]
            index = self.attempt_index.get(attempt_id)
            if index is None:
                self.attempt_index[attempt_id] = len(self.attempts)
                self.attempts.append(record)
            else:  # the same attempt logged again (e.g. before and after dispatch): last word wins
                earlier = self.attempts[index]
                merged = dict(earlier)
                merged.update({k: v for k, v in record.items() if v is not None})
                merged["_lines"] = earlier.get("_lines", [earlier.get("_line")]) + [record.get("_line")]
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

    def forget_derived(self) -> None:
        """Drop what the rules derived and cached (the model's replay, its keys' fingerprints): once the operation
        is judged its verdict holds what it needs of them, and a run judges every operation before any is let go."""
        self._refs = self._fps = self.replayed = None

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

    def intent_ids(self) -> list[str]:
        """The distinct intents the operation's declarations name (more than one is H032)."""
        return list(dict.fromkeys(o["intent_id"] for o in self.operations if o.get("intent_id")))

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
        index = self.attempt_index.get(attempt_id or "")
        return None if index is None else self.attempts[index]

    @property
    def evidence_ids(self) -> set[str]:
        ids = set(self.attempt_index)
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
        kind = self.intent.get("kind") if isinstance(self.intent, dict) else None
        return self.contract.deduplicates(kind if isinstance(kind, str) else None)

    def convergence_exit_status(self) -> int | None:
        """The exit status by which this operation's set_state command says the state already holds (its
        contract's ``convergence_exit_status``): a rerun that converges acts at most once, as a key would make
        it; None when the contract declares none (or is unknown)."""
        kind = self.intent.get("kind") if isinstance(self.intent, dict) else None
        spec = self.contract.operations.get(kind) if self.contract is not None and isinstance(kind, str) else None
        return spec.convergence_exit_status if spec is not None and spec.family == "set_state" else None

    def retention_seconds(self) -> float | None:
        return self.contract.idempotency.retention_seconds if self.contract is not None else None

    def lookup_lag_seconds(self) -> float:
        """The index lag of the destination's lookup: documented in its contract (``lookup.lag_seconds``)
        or declared in its spec (``lookup_lag_seconds``); 0 when neither says."""
        lookup = self.contract.lookup if self.contract is not None else None
        declared = (self.spec or {}).get("lookup_lag_seconds")
        lags = [lookup.lag_seconds if lookup is not None else None,
                declared if isinstance(declared, (int, float)) and not isinstance(declared, bool) else None]
        return max([float(lag) for lag in lags if lag is not None], default=0.0)

    def interrupted_by_crash(self, attempt: dict[str, Any], entry: dict[str, Any]) -> bool:
        """The harness killed the agent after this attempt's request left and before it was logged: the run that
        logged it (after the restart) cannot know what the dead one received."""
        return crashed_between(entry.get("ts_request"), attempt.get("ts"), self.crashes)

    def resumed_after_crash(self, attempt: dict[str, Any]) -> bool:
        """The first attempt the operation logs after a planned crash: the restarted run reporting the one the
        killed run had in flight (a crash before it was logged), whose fate it cannot know."""
        logged = ts_value(attempt.get("ts"))
        return bool(logged) and any(
            crash <= logged and not any(crash <= ts_value(a.get("ts")) < logged for a in self.attempts
                                        if a is not attempt) for crash in self.crashes)

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


#END
