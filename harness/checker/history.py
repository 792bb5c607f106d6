"""Replaying one operation's history through the operation model (``harness.model.operation``).

``replay(op)`` walks the operation's events in log order, takes each as a step of the model from the
state the earlier ones left, and returns what it found: the transitions taken (what the history
exercised, for "held / not exercised" and the catalogue's coverage), the facts met on the way
(``tags``: an attempt in doubt, a retry, a 429, a negative lookup...), and every step the model does not
allow at that point, by that actor, or that the wire and the ledger contradict (``violations``, rule
H060). The named rules say most of these better; ``judge_operation`` keeps a violation only when no
named finding already cites its log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.checker.context import OperationContext, log_ref, tool_error, wire_ref
from harness.model import operation as model
from harness.model.outcome import may_have_acted, succeeded

SENT = ("sent_no_response", "response_received")


@dataclass
class Violation:
    line: int | None
    message: str
    evidence: list[dict[str, Any]]


@dataclass
class Replay:
    transitions: set[str] = field(default_factory=set)  # Transition.label of every row taken
    tags: set[str] = field(default_factory=set)  # steps and facts met (what the rules' ``exercised`` name)
    violations: list[Violation] = field(default_factory=list)
    state: str = model.UNDECLARED


def _status(op: OperationContext, attempt: dict[str, Any]) -> Any:
    """The status the client received: the wire's where the attempt is matched to an answered flow."""
    entry = op.wire.get(attempt["attempt_id"])
    if entry and entry.get("client_outcome") == "response" and entry.get("client_status") is not None:
        return entry["client_status"]
    return attempt.get("http_status")


def _actor(record: dict[str, Any], worker_sessions: set[str]) -> str:
    if record.get("event") == "approval":
        return model.OPERATOR
    if record.get("event") == "observation" and record.get("source") == "operator":
        return model.OPERATOR
    if record.get("worker") or record.get("session_id") in worker_sessions:
        return model.WORKER  # a worker's events, and those of its session (it logs its own evidence)
    return model.AGENT


class _Walk:
    def __init__(self, op: OperationContext) -> None:
        self.op = op
        self.out = Replay()
        self.sessions: set[str] = set()  # the owner's sessions (a new one is a restart)
        self.worker_sessions: set[str] = set()
        self.workers: set[str] = set()
        self.logged: dict[str, str | None] = {}  # attempt id -> its dispatch state as last logged
        self.attempts: list[dict[str, Any]] = []  # first logging of each attempt, in order
        self.doubted: dict[str, Any] | None = None  # the attempt that put the operation in doubt
        self.confirmed_by = ""  # what showed the effect done (an answer, an observation)
        self.approved_since = False  # an approval since the operation last changed state (doubt, confirmed, unknown)
        self.observed: set[str] = set()  # observation and approval ids logged so far (what a resolution may cite)
        self.approvals: set[str] = set()

    # -- the bookkeeping of one step
    def take(self, step: str, record: dict[str, Any], actor: str, target: str | None = None) -> bool:
        """Take ``step`` from the current state; a step the model has no row for is a violation."""
        state = self.out.state
        rows = model.transitions_from(state, step)
        if not rows:
            allowed = ", ".join(model.allowed_steps(state)) or "nothing"
            self.violate(record, f"{self._what(record)} is a '{step}' step from state {state}, which the operation "
                                 f"model does not allow (from {state} it allows: {allowed})")
            return False
        row = rows[0]
        if actor not in row.actors:
            self.violate(record, f"{self._what(record)} is a '{step}' step by the {actor}; the operation model lets "
                                 f"only the {' or '.join(row.actors)} take it")
        self.out.transitions.add(row.label)
        self.out.tags.add(step)
        if row.target == "=":
            pass
        elif row.target == "*":
            if target is not None:
                self.out.state = target
        else:
            self.out.state = row.target
        return True

    def violate(self, record: dict[str, Any], message: str, wire: list[dict[str, Any]] | None = None) -> None:
        self.out.violations.append(Violation(record.get("_line"), message, [log_ref(record), *(wire or [])]))

    def _what(self, record: dict[str, Any]) -> str:
        name = record.get("attempt_id") or record.get("observation_id") or record.get("approval_id") or ""
        where = f" (log line {record.get('_line')})" if record.get("_line") is not None else ""
        return f"{record.get('event')} {name}".rstrip() + f" of {self.op.operation_id}{where}"

    # -- the events
    def walk(self) -> Replay:
        for record in self.op.history:
            session = record.get("session_id")
            worker = record.get("worker")
            if worker and isinstance(session, str):
                self.worker_sessions.add(session)
            actor = _actor(record, self.worker_sessions)
            if self.out.state != model.UNDECLARED:
                if worker and worker not in self.workers:
                    self.take("hand_off", record, actor)
                elif actor == model.AGENT and isinstance(session, str) and session not in self.sessions:
                    self.take("restart", record, actor)
            if worker:
                self.workers.add(worker)
            if actor == model.AGENT and isinstance(session, str):
                self.sessions.add(session)
            getattr(self, "_" + str(record.get("event")), self._other)(record, actor)
        return self.out

    def _other(self, record: dict[str, Any], actor: str) -> None:
        pass  # the article's effect lines: no step of ours

    def _operation(self, record: dict[str, Any], actor: str) -> None:
        if self.out.state == model.UNDECLARED:
            step = ("correct" if record.get("correction_of_operation_id") else
                    "supersede" if record.get("supersedes_operation_id") else "declare")
            self.take(step, record, actor)
        else:
            self.take("redeclare", record, actor)

    def _attempt(self, record: dict[str, Any], actor: str) -> None:
        op, attempt_id = self.op, record["attempt_id"]
        state = record.get("dispatch_state")
        if attempt_id in self.logged:
            before = self.logged[attempt_id]
            self.take("relog_attempt", record, actor)
            if state is not None and state not in model.ATTEMPT_STATES.get(before, model.ATTEMPT_STATES[None]):
                self.violate(record, f"{self._what(record)} was logged {before}, then logged again {state}: a "
                                     f"dispatch state that said the request left is never rewritten; new evidence "
                                     f"is an observation")
            self.logged[attempt_id] = state or before
            merged = op.attempt(attempt_id) or record
            self._outcome(merged if state is None else {**merged, "dispatch_state": state})
            return
        parent = self.attempts[-1] if self.attempts else None
        self.attempts.append(record)
        self.logged[attempt_id] = state
        if state == "not_sent":
            self.out.tags.add("not_sent")
        elif state in SENT:
            self.out.tags.add("sent")
        if parent is None:
            if not self.take("attempt", record, actor):
                return
        elif self.out.state == model.IN_DOUBT:
            self._retry_in_doubt(record, actor)
        else:
            if self.out.state in (model.UNKNOWN, model.CONFIRMED) and not self.approved_since:
                why = ("the operation was resolved unknown" if self.out.state == model.UNKNOWN else
                       f"{self.confirmed_by} showed the effect done")
                self.violate(record, f"{self._what(record)} executes the operation again after {why}, with no "
                                     f"operator's approval since: the operation model never re-executes what is "
                                     f"done, nor an unknown write on the agent's own say")
            if not self.take("retry", record, actor):
                return
        if parent is not None:
            retried = op.attempt(record.get("retry_of_attempt_id")) or parent
            if may_have_acted(retried.get("dispatch_state"), _status(op, retried), tool_error=tool_error(op, retried)):
                self.out.tags.add("retry_after_doubt")
            self._retry_is_the_same_call(record, retried, parent)
            self._reason_fits(record, retried)
        self._wire_agrees(record)
        self._outcome(op.attempt(attempt_id) or record)

    def _retry_in_doubt(self, record: dict[str, Any], actor: str) -> None:
        op, doubted = self.op, self.doubted or {}
        self.out.tags.add("retry")
        key = record.get("idempotency_key")
        dedup = bool(key) and key == doubted.get("idempotency_key") and op.takes_keys() is not False
        dedup = dedup or op.convergence_exit_status() is not None  # the command converges: acts at most once
        self.take("retry_in_doubt", record, actor)
        if not (dedup or self.approved_since):
            why = ("without an idempotency key" if not key else
                   "with another idempotency key than it" if key != doubted.get("idempotency_key") else
                   f"on {op.destination}, which does not deduplicate")
            self.violate(record, f"{self._what(record)} retried while {doubted.get('attempt_id')} may have acted, "
                                 f"{why}, and no observation or approval came between: the operation model allows "
                                 f"a retry out of doubt only with deduplication in force, reconciliation or an "
                                 f"approval")

    def _retry_is_the_same_call(self, record: dict[str, Any], retried: dict[str, Any], last: dict[str, Any]) -> None:
        """A retry names an earlier attempt, repeats its payload under its key, and has budget left."""
        op, named = self.op, record.get("retry_of_attempt_id")
        if len({r.get("intent_id") for r in op.operations if r.get("intent_id")}) > 1:
            return  # two intents under one id: H032's, and their attempts are no retries of each other
        if not named or named not in self.logged or named == record["attempt_id"]:
            self.violate(record, f"{self._what(record)} is a retry (attempt {len(self.attempts)} of the operation) "
                                 f"that names {'no attempt' if not named else 'no earlier attempt, ' + str(named)} "
                                 f"as the one it retries: the model links every retry to its parent")
        mine, theirs = record.get("request_fingerprint"), retried.get("request_fingerprint")
        if mine and theirs and mine != theirs:
            self.violate(record, f"{self._what(record)} retries {retried['attempt_id']} with another request "
                                 f"fingerprint ({mine} after {theirs}): a changed payload is a new operation")
        key, before = record.get("idempotency_key"), retried.get("idempotency_key")
        if before and key != before and op.takes_keys() is not False:
            self.violate(record, f"{self._what(record)} retries {retried['attempt_id']} under key {key!r} after "
                                 f"{before!r}: the key is the operation's, the same on every attempt")
        if last.get("attempt_budget_remaining") == 0:
            self.violate(record, f"{self._what(record)} comes after {last['attempt_id']} logged no attempt budget "
                                 f"left")

    def _reason_fits(self, record: dict[str, Any], parent: dict[str, Any]) -> None:
        reason = record.get("retry_reason")
        if not isinstance(reason, str) or reason not in model.RETRY_REASONS:
            return  # none, or outside the vocabulary: H008's
        self.out.tags.add("retry")
        approved = any((a.get("_line") or 0) < (record.get("_line") or 0) and a.get("decision") == "approved"
                       for a in self.op.approvals)
        logged = self.logged.get(parent["attempt_id"]) or parent.get("dispatch_state")
        if not model.retry_reason_fits(reason, logged, _status(self.op, parent), approved,
                                       tool_error=tool_error(self.op, parent)):
            self.violate(record, f"attempt {record['attempt_id']} of {self.op.operation_id} retries "
                                 f"{parent['attempt_id']} for reason {reason}, which needs "
                                 f"{model.RETRY_REASONS[reason]}, but {parent['attempt_id']} was logged {logged}"
                                 + (f" with status {_status(self.op, parent)}" if _status(self.op, parent) else ""),
                         )

    def _wire_agrees(self, record: dict[str, Any]) -> None:
        op = self.op
        if op.offline:
            return
        entry = op.wire.get(record["attempt_id"])
        state = record.get("dispatch_state")
        if entry is None:
            if state in SENT and not (state == "sent_no_response" and op.resumed_after_crash(record)):
                self.violate(record, f"attempt {record['attempt_id']} of {op.operation_id} is logged {state}, but "
                                     f"neither the proxy journal nor the destination's ledger saw its request")
            return
        if entry.get("forwarded") and entry.get("client_outcome") not in ("response", None):
            self.out.tags.add("lost")
        said = entry.get("client_outcome")
        if state == "response_received" and said not in ("response", None):
            self.violate(record, f"{self._what(record)} is logged response_received, but the journal shows the "
                                 f"client got no answer ({said}, flow {entry.get('flow_id')})", [wire_ref(entry)])
        logged, received = record.get("http_status"), entry.get("client_status")
        if state == "response_received" and said == "response" and logged is not None and received is not None \
                and logged != received:
            self.violate(record, f"{self._what(record)} is logged http_status {logged}, but the journal shows the "
                                 f"client received {received} (flow {entry.get('flow_id')})", [wire_ref(entry)])
        if state == "not_sent" and entry.get("forwarded"):
            self.violate(record, f"{self._what(record)} is logged not_sent, but the journal shows its request "
                                 f"forwarded (flow {entry.get('flow_id')})", [wire_ref(entry)])

    def _outcome(self, attempt: dict[str, Any]) -> None:
        """After an attempt: in doubt when it may have acted, confirmed when its answer shows the effect done,
        else open (a definitive answer settles the doubt)."""
        if self.out.state not in (*model.LIVE, model.UNKNOWN):
            return
        status = _status(self.op, attempt)
        exit_status = attempt.get("exit_status")
        answered = attempt.get("dispatch_state") == "response_received" and not tool_error(self.op, attempt)
        converged = exit_status is not None and exit_status == self.op.convergence_exit_status()
        if status is None and answered and (exit_status in (0, None) or converged):
            # no HTTP status: an SSH command's exit status is its answer (none logged: it exited 0, as H025 reads
            # it); a set_state command's convergence exit says the state already holds
            self.confirmed(f"{attempt['attempt_id']}'s answer")
            return
        if status == 429:
            self.out.tags.add("rate_limited")
        errored = tool_error(self.op, attempt)
        if may_have_acted(attempt.get("dispatch_state"), status, tool_error=errored):
            self.out.state, self.doubted, self.approved_since = model.IN_DOUBT, attempt, False
            self.out.tags.add("doubt")
        elif succeeded(attempt.get("dispatch_state"), status, tool_error=errored):
            self.confirmed(f"{attempt['attempt_id']}'s {status} answer")
        else:
            self.out.state = model.OPEN

    def confirmed(self, by: str) -> None:
        self.out.state, self.confirmed_by, self.approved_since, self.doubted = model.CONFIRMED, by, False, None

    def _observation(self, record: dict[str, Any], actor: str) -> None:
        op = self.op
        if isinstance(record.get("observation_id"), str):
            self.observed.add(record["observation_id"])
        read = op.observed.get(record.get("observation_id") or "")
        answered = read is None or (read.get("client_outcome") == "response"
                                    and isinstance(read.get("client_status"), int)
                                    and 200 <= read["client_status"] < 300)
        found = record.get("found")
        lag = record.get("lag_possible")
        if lag is None:
            lag = op.lookup_lag_seconds() > 0
        conclusive = answered and (found is True or (found is False and lag is not True))
        if found is False:
            self.out.tags.add("negative_lookup")
        if not conclusive:
            self.take("observe_inconclusive", record, actor)
            return
        live = self.out.state in (*model.LIVE, model.UNKNOWN)
        target = model.OPEN if self.out.state == model.IN_DOUBT else None
        if self.take("observe", record, actor, target):
            self.doubted = None
            if live and found is True:
                self.confirmed(f"observation {record.get('observation_id')}")
        if not op.offline and found is True:
            held = set(op.effect_refs())
            strangers = [r for r in record.get("effect_refs") or [] if isinstance(r, str) and r not in held]
            if strangers:
                self.violate(record, f"observation {record['observation_id']} of {op.operation_id} found "
                                     f"{', '.join(strangers)}, which the destination's ledger does not hold for it")

    def _approval(self, record: dict[str, Any], actor: str) -> None:
        if isinstance(record.get("approval_id"), str):
            self.approvals.add(record["approval_id"])
        self.take("approve", record, actor)
        if record.get("decision") == "approved":
            self.approved_since = True

    def _resolution(self, record: dict[str, Any], actor: str) -> None:
        op, state = self.op, record.get("state")
        before = self.out.state
        if not isinstance(state, str):
            return
        self.out.tags.add("resolve:" + state)
        if before in model.FINAL_STATES and state not in (before, "duplicate_effect_confirmed"):
            self.violate(record, f"resolution of {op.operation_id} (log line {record.get('_line')}) rewrites its "
                                 f"final state {before} as {state}: a final resolution is never rewritten, only a "
                                 f"second effect found moves it to duplicate_effect_confirmed")
            self.take("resolve", record, actor)
            return
        if before == model.IN_DOUBT and state in ("failed", "cancelled"):
            self.violate(record, f"{op.operation_id} was resolved {state} (log line {record.get('_line')}) while "
                                 f"{(self.doubted or {}).get('attempt_id')} may have acted and nothing since said "
                                 f"what became of it: the truth is unknown")
        if before == model.CONFIRMED and state in ("failed", "cancelled"):
            self.violate(record, f"{op.operation_id} was resolved {state} (log line {record.get('_line')}) after "
                                 f"{self.confirmed_by} showed the effect done")
        if state == "succeeded" and before != model.CONFIRMED:
            self.violate(record, f"{op.operation_id} was resolved succeeded (log line {record.get('_line')}) from "
                                 f"state {before}: nothing in its history before it (an answer that is not 202 "
                                 f"Accepted, an observation that found the effect) showed the effect done")
        seen = set(self.logged) | self.observed | self.approvals
        ahead = [c for c in record.get("evidence") or [] if isinstance(c, str) and c not in seen]
        if ahead:
            self.violate(record, f"resolution of {op.operation_id} (log line {record.get('_line')}) cites "
                                 f"{', '.join(ahead)}, which its history had not logged before it")
        if not self.take("resolve", record, actor, state):
            return
        self.approved_since = False
        if not op.offline:
            held = set(op.effect_refs())
            strangers = [r for r in record.get("effect_refs") or [] if isinstance(r, str) and r not in held]
            if strangers:
                self.violate(record, f"resolution of {op.operation_id} names {', '.join(strangers)}, which the "
                                     f"destination's ledger does not hold for it")
            count = len(op.effect_refs())
            wrong = ((state == "succeeded" and count == 0) or (state in ("failed", "cancelled") and count > 0)
                     or (state == "duplicate_effect_confirmed" and count < 2))
            if wrong:
                self.violate(record, f"{op.operation_id} was resolved {state}, but the destination's ledger holds "
                                     f"{count} effect(s) for it")


def replay(op: OperationContext) -> Replay:
    """The operation's history replayed through the model (cached on the operation)."""
    cached = op.replayed
    if cached is None:
        cached = op.replayed = _Walk(op).walk()
    return cached
