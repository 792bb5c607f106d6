"""The whole run's view of the evidence: its operations in first-seen order, each tied to the wire and the
ledger, and what the wire held that no attempt explains."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.checker.context import OperationContext
from harness.checker.correlation import Correlation, correlate
from harness.contract import ContextKey, DestinationContract
from harness.evidence import Evidence

if TYPE_CHECKING:
    from harness.checker.attribution import Attribution

# how the run rules hear the log while the operations are built: (evidence, add a record) -> None
Feed = Callable[[Evidence, Callable[[dict[str, Any]], OperationContext]], None]


class RunContext:
    """The whole run: operations in first-seen order, and what the wire held that no attempt explains.

    ``feed`` hands the log to the run rules in line order while the operations are built
    (``RunRules.feed_evidence``).
    """

    def __init__(self, evidence: Evidence, *, offline: bool = False, feed: Feed | None = None,
                 attribution: Attribution | None = None) -> None:
        self.evidence = evidence
        self.offline = offline
        self.ops: dict[str, OperationContext] = {}
        # black-box mode: the wire and the ledger given to the intents; no log is read, so no operations
        self.attribution = attribution
        # the log tied to the wire and the ledger (none offline, nor in black-box mode): each operation reads its part
        self.correlation = Correlation()
        if attribution is not None:
            return
        if feed is None:
            for record in evidence.events:
                self._add(record)
        else:
            feed(evidence, self._add)
        ids = set(self.ops)
        contracts = {name: DestinationContract.from_dict(entry["contract"])
                     for name, entry in evidence.destinations.items()
                     if isinstance(entry, dict) and entry.get("contract") is not None}
        runs = evidence.agent.get(ContextKey.RUNS)
        crashes = tuple(float(r["ended_at"]) for r in (runs if isinstance(runs, list) else [])
                        if isinstance(r, dict) and r.get("killed_by_harness") is True
                        and isinstance(r.get("ended_at"), (int, float)) and not isinstance(r["ended_at"], bool))
        crashes += worker_kills(evidence.journal)
        intents = {i.get("intent_id"): i for i in evidence.intents}
        for op in self.ops.values():
            op.run_intent = intents.get(op.intent_id)
            op.all_operation_ids = ids
            op.peers = self.ops
            op.crashes = crashes
            op.reused_sessions = evidence.reused_sessions
            entry = evidence.destinations.get(op.destination or "")
            if isinstance(entry, dict):
                op.contract = contracts.get(op.destination or "")
                op.spec = entry.get("spec")
        if not self.offline:
            found = self.correlation = correlate(self.ops, evidence, crashes)
            for op_id, op in self.ops.items():
                op.wire, op.observed = found.wire[op_id], found.observed[op_id]
                op.ledger_requests, op.ledger_effects = found.ledger_requests[op_id], found.ledger_effects[op_id]

    @property
    def unmatched_wire(self) -> list[dict[str, Any]]:
        """The wire records no logged attempt explains."""
        return self.correlation.unmatched_wire

    @property
    def unattributed_effects(self) -> list[dict[str, Any]]:
        """The ledger's effects no operation owns."""
        return self.correlation.unattributed_effects

    def _add(self, record: dict[str, Any]) -> OperationContext:
        # an operation is in the format of its first line (the article's lines say so), ours once it has one of ours
        fmt = record.get("_format", "events")
        op = self.ops.get(record["operation_id"])
        if op is None:
            op = self.ops[record["operation_id"]] = OperationContext(record["operation_id"], fmt=fmt,
                                                                     offline=self.offline)
        elif fmt == "events":
            op.format = "events"
        op.add(record)
        return op


def worker_kills(journal: list[dict[str, Any]]) -> tuple[float, ...]:
    """When the proxy killed the process that sent a request (``kill_sender_after_commit``): a crash of that
    process, as the harness's kills of the agent are; its engine's rerun cannot know what the dead one received."""
    times = []
    for entry in journal:
        killed = entry.get("process_killed")
        when = killed.get("ts") if isinstance(killed, dict) else None
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            times.append(float(when))
    return tuple(sorted(times))
