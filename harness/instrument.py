"""Instrumentation for Python agents: a full audit log from an existing agent in a few lines.

::

    from harness.instrument import instrument

    with instrument() as audit:                      # patches urllib3 (so requests) and httpx
        for intent in audit.todo():                  # the intents not resolved yet (a restart skips the rest)
            with audit.operation(intent) as op:      # operation id kept in the state dir; its key
                requests.post(url, json={**intent["params"], "client_reference": op.operation_id},
                              headers={"Idempotency-Key": op.idempotency_key}, timeout=(1, 1.5))
            # leaving the scope writes the resolution the evidence supports (succeeded, failed, unknown)

Inside an operation scope every request the agent makes with urllib3 (requests included: urllib3 is its
transport) or httpx (sync and async) is logged as it went on the wire: a write is an ``attempt`` with its
dispatch state, fingerprint, key, retry link, reason and budget; a read of the destination's lookup route
is a ``lookup`` observation, a read of its status route a ``status_poll``. The patches are at the wire
level (``HTTPConnectionPool._make_request``, ``HTTPTransport.handle_request``), so each retry urllib3's
``Retry`` makes is an attempt of its own. Nothing here decides for the agent: it records what happened,
and the resolution it writes is the one the evidence supports, so a wrong agent stays wrong in the log.
The whole story is docs/instrument.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from harness.contract import (
    AUDIT_LOG_ENV,
    IDEMPOTENCY_HEADER,
    INTENTS_ENV,
    LOOKUP_RESULT_FIELD,
    STATE_DIR_ENV,
    TRACEPARENT_HEADER,
    DestinationContract,
    OperationContract,
    destination_env_name,
    path_template_pattern,
)
from harness.fingerprint import fingerprint, fingerprint_body
from harness.model.agent import decide_resolution, derive_key, may_have_acted, retry_reason_after, succeeded
from harness.model.agent import traceparent as new_traceparent
from harness.recorder import Recorder, logged_records, new_id

__all__ = [
    "AttemptRecord",
    "Instrumentation",
    "ObservationRecord",
    "Operation",
    "backoff_on_backoff",
    "current_operation",
    "instrument",
    "tenacity_before_sleep",
    "tenacity_wait_retry_after",
]

log = logging.getLogger("harness.instrument")

STATE_FILE = "harness-instrument.json"  # in HARNESS_STATE_DIR: the operations, keyed by intent id
DEFAULT_MAX_ATTEMPTS = 3
MAX_BODY = 1 << 20  # bytes of an answer kept to read its effect ref; past it the body is not parsed
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_ACTIVE: Instrumentation | None = None
_ACTIVE_LOCK = threading.Lock()
_CURRENT: contextvars.ContextVar[Operation | None] = contextvars.ContextVar("harness_operation", default=None)


# -- records ---------------------------------------------------------------------------------------

@dataclass
class AttemptRecord:
    """One write of the operation on the wire, as the client saw it. ``dispatch_state`` is None while in flight."""

    attempt_id: str
    ts: float  # when it was sent (the clock just before the request left)
    method: str
    path: str
    idempotency_key: str | None
    request_fingerprint: str | None
    traceparent: str | None
    attempt_number: int
    budget_remaining: int
    retry_of_attempt_id: str | None = None
    retry_reason: str | None = None
    retry_decision: str | None = None
    prior_request_fingerprint: str | None = None
    dispatch_state: str | None = None
    http_status: int | None = None
    effect_refs: list[str] = field(default_factory=list)
    retry_after_seconds: float | None = None
    error: str | None = None
    status_url: str | None = None  # a 202 Accepted: where the operation's status is polled
    logged: bool = False

    @property
    def tool_error(self) -> bool:
        """Always False: harness.instrument logs HTTP requests, never an MCP tool result."""
        return False

    @property
    def uncertain(self) -> bool:
        """True when this attempt may have acted without the client learning it did (harness.model)."""
        return may_have_acted(self.dispatch_state, self.http_status)

    @property
    def succeeded(self) -> bool:
        return succeeded(self.dispatch_state, self.http_status)


@dataclass
class ObservationRecord:
    """A read that is evidence, not an attempt: a lookup, a status poll, a read after write, the agent's own."""

    observation_id: str
    ts: float
    source: str
    found: bool | None
    effect_refs: list[str] = field(default_factory=list)
    lag_possible: bool | None = None
    status: str | None = None  # a status poll: the operation's reported status


@dataclass(eq=False)
class _Exchange:
    """One request of an operation, from the moment it is sent until its outcome is known."""

    op: Operation
    role: str  # attempt | lookup | status_poll | read_after_write
    method: str
    path: str
    attempt: AttemptRecord | None = None
    sent_at: float = 0.0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    finished: bool = False

    def answered(self, status: int, headers: Mapping[str, str]) -> None:
        self.status = status
        self.headers = {str(k).lower(): str(v) for k, v in headers.items()}

    def feed(self, data: bytes | None) -> None:
        if data and len(self.body) < MAX_BODY:
            self.body.extend(data[:MAX_BODY - len(self.body)])

    def failed(self, dispatch_state: str, error: str) -> None:
        self.op._finish(self, dispatch_state, error)

    def done(self) -> None:
        self.op._finish(self, "response_received", None)

    def broken(self, exc: BaseException) -> None:
        """The answer broke off after its status line (a cut body, a bad chunk, a timeout mid-body): the
        request left and no usable answer came."""
        self.op._finish(self, "sent_no_response", f"the answer broke off: {_describe(exc)}")


# -- the instrumentation ---------------------------------------------------------------------------

class Instrumentation:
    """What ``instrument()`` yields: the recorder, the intents and contracts, and the operation scopes."""

    def __init__(self, recorder: Recorder | None = None, *, env: Mapping[str, str] | None = None,
                 intents_path: str | os.PathLike[str] | None = None,
                 state_dir: str | os.PathLike[str] | None = None, traceparent: bool = True) -> None:
        self.env = dict(os.environ if env is None else env)
        if recorder is None and not self.env.get(AUDIT_LOG_ENV):
            raise RuntimeError(f"instrument(): {AUDIT_LOG_ENV} is not set; run the agent under the harness "
                               "(python -m harness run SCENARIO --agent CMD), or give it a Recorder")
        self.recorder = recorder if recorder is not None else Recorder(self.env[AUDIT_LOG_ENV])
        self._own_recorder = recorder is None
        path = intents_path or self.env.get(INTENTS_ENV)
        doc: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
        self.intents: list[dict[str, Any]] = list(doc.get("intents") or [])
        self.contracts: dict[str, DestinationContract] = {
            name: DestinationContract.from_dict(spec) for name, spec in (doc.get("destinations") or {}).items()}
        self.traceparent = traceparent
        folder = state_dir or self.env.get(STATE_DIR_ENV)
        self.state_path = Path(folder) / STATE_FILE if folder else None
        self.state: dict[str, dict[str, Any]] = {}
        if self.state_path is not None and self.state_path.exists():
            self.state = json.loads(self.state_path.read_text(encoding="utf-8"))
        self.logged = logged_records(self.recorder.path)  # what an earlier run of the agent already wrote
        self._origins = self._destination_origins()
        self._lock = threading.RLock()
        self._open: list[Operation] = []
        self._injected: set[str] = set()  # the traceparents this instrumentation added

    # -- the contract --------------------------------------------------------------------------------

    def base_url(self, destination: str) -> str | None:
        """The destination's base URL (``HARNESS_DESTINATION_<NAME>``), without a trailing slash."""
        url = self.env.get(destination_env_name(destination))
        return url.rstrip("/") if url else None

    def _destination_origins(self) -> list[tuple[tuple[str, str, int], str, str]]:
        out = []
        for name in self.contracts:
            url = self.base_url(name)
            if url:
                parts = urlsplit(url)
                out.append((_origin(parts.scheme, parts.hostname or "", parts.port), parts.path.rstrip("/"), name))
        return out

    def destination_of(self, scheme: str, host: str, port: int | None, path: str) -> tuple[str | None, str]:
        """Which destination a request goes to (None: none the harness named), and its path on it."""
        origin = _origin(scheme, host, port)
        for known, prefix, name in self._origins:
            if known == origin and (not prefix or path == prefix or path.startswith(prefix + "/")):
                return name, path[len(prefix):] or "/"
        return None, path

    # -- operations ----------------------------------------------------------------------------------

    def todo(self, intents: Iterable[Mapping[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
        """The intents (default: the intents file's) whose operation is not resolved yet: after a restart,
        the ones an earlier run closed are skipped."""
        for intent in (self.intents if intents is None else intents):
            saved = self.state.get(str(intent.get("intent_id")))
            if not (saved and saved.get("resolved")):
                yield dict(intent)

    def operation(self, intent: Mapping[str, Any] | None = None, *, intent_id: str | None = None,
                  kind: str | None = None, destination: str | None = None,
                  params: Mapping[str, Any] | None = None, max_attempts: int | None = None,
                  idempotency_key: str | None = None, payload: Any = None) -> Operation:
        """The operation scope of one intent (``with audit.operation(intent) as op:``).

        ``intent`` is an entry of the intents file, or give ``intent_id``, ``kind``, ``destination``
        (``params``). ``max_attempts`` is the agent's attempt budget for the operation (default 3; a
        tenacity ``stop_after_attempt`` seen by the hook sets it when not given). ``idempotency_key`` declares
        a key the agent derives itself in the operation event (else none is declared: ``op.idempotency_key``, derived
        from the operation id, is offered, and the key each request carries is logged on its attempt).
        ``payload`` (optional) gives the operation event its ``payload_fingerprint``."""
        data = dict(intent or {})
        for name, value in (("intent_id", intent_id), ("kind", kind), ("destination", destination),
                            ("params", params)):
            if value is not None:
                data[name] = dict(value) if isinstance(value, Mapping) else value
        for name in ("intent_id", "kind", "destination"):
            if not isinstance(data.get(name), str):
                raise ValueError(f"operation(): the intent needs {name!r} (a string); got {data.get(name)!r}")
        data.setdefault("params", {})
        return Operation(self, data, max_attempts=max_attempts, idempotency_key=idempotency_key, payload=payload)

    def current(self) -> Operation | None:
        """The operation whose scope encloses this code: the context's, else the only one open."""
        op = _CURRENT.get()
        if op is not None and not op.closed:
            return op
        with self._lock:
            return self._open[0] if len(self._open) == 1 else None

    def save(self) -> None:
        if self.state_path is None:
            return
        with self._lock:
            tmp = self.state_path.with_name(f"{self.state_path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.state_path)  # atomic: a kill leaves the old state or the new one

    # -- the wire ------------------------------------------------------------------------------------

    def begin(self, method: str, scheme: str, host: str, port: int | None, target: str,
              headers: Mapping[str, str], body: bytes | None) -> tuple[_Exchange | None, dict[str, str]]:
        """A request is about to leave. Returns its exchange (None: not the audit's business) and the headers
        to add to it (a ``traceparent`` for an attempt that carries none)."""
        parts = urlsplit(target)
        if parts.scheme and parts.netloc:  # an absolute URL (a request to a forward proxy)
            scheme, host, port = parts.scheme, parts.hostname or "", parts.port
        destination, path = self.destination_of(scheme, host, port, parts.path or "/")
        op = self.current()
        method = method.upper()
        if op is None:
            if method not in READ_METHODS:
                log.warning("%s %s://%s%s outside any operation scope: not in the audit log (the checker "
                            "will see an unlogged write, H017)", method, scheme, host, parts.path)
            return None, {}
        # another destination, or an origin the harness did not name while it named the operation's: not ours
        if destination != op.destination and (destination is not None or self.base_url(op.destination)):
            if method not in READ_METHODS:
                log.warning("%s %s://%s%s inside the scope of operation %s, whose destination is %s: not logged",
                            method, scheme, host, parts.path, op.operation_id, op.destination)
            return None, {}
        return op._begin(method, path, {str(k).lower(): str(v) for k, v in headers.items()}, body)

    def close(self) -> None:
        with self._lock:
            for op in list(self._open):
                op._close_exchanges()
        if self._own_recorder:
            self.recorder.close()


@contextlib.contextmanager
def instrument(recorder: Recorder | None = None, *, env: Mapping[str, str] | None = None,
               intents_path: str | os.PathLike[str] | None = None,
               state_dir: str | os.PathLike[str] | None = None, traceparent: bool = True,
               clients: Iterable[str] = ("urllib3", "httpx")) -> Iterator[Instrumentation]:
    """Patch the HTTP clients (``urllib3``, which ``requests`` rides on, and ``httpx`` if installed) for the
    block, and yield the ``Instrumentation``. By default everything comes from the harness's environment:
    the audit log (``Recorder.from_env()``), the intents file and its destination contracts, the state
    dir, the destinations' URLs. ``traceparent=False`` adds no ``traceparent`` header to attempts that
    carry none. One instrumentation at a time per process; the patches are undone on exit."""
    global _ACTIVE
    inst = Instrumentation(recorder, env=env, intents_path=intents_path, state_dir=state_dir,
                           traceparent=traceparent)
    with _ACTIVE_LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("instrument() is already active in this process; nest operations, not instruments")
        _ACTIVE = inst
    undo: list[Callable[[], None]] = []
    try:
        wanted = set(clients)
        if "urllib3" in wanted or "requests" in wanted:
            undo.extend(_patch_urllib3())
        if "httpx" in wanted:
            undo.extend(_patch_httpx())
        yield inst
    finally:
        for step in reversed(undo):
            step()
        with _ACTIVE_LOCK:
            _ACTIVE = None
        inst.close()


def current_operation() -> Operation | None:
    """The operation scope enclosing the caller, if an instrumentation is active."""
    inst = _ACTIVE
    return inst.current() if inst is not None else None


# -- one operation ---------------------------------------------------------------------------------

class Operation:
    """An operation scope: one intent's operation id, key, attempts, observations and resolution."""

    def __init__(self, inst: Instrumentation, intent: dict[str, Any], *, max_attempts: int | None,
                 idempotency_key: str | None, payload: Any) -> None:
        self.inst = inst
        self.intent = intent
        self.intent_id: str = intent["intent_id"]
        self.destination: str = intent["destination"]
        self.kind: str = intent["kind"]
        self.contract: DestinationContract = inst.contracts.get(self.destination) or DestinationContract("unknown")
        self.operation_contract: OperationContract | None = self.contract.operations.get(self.kind)
        self._explicit_budget = max_attempts is not None
        self.max_attempts = max_attempts if max_attempts is not None else DEFAULT_MAX_ATTEMPTS
        self._declared_key = idempotency_key
        self._payload = payload
        self.records: list[AttemptRecord | ObservationRecord] = []
        self.state: str | None = None  # the last resolution's state
        self.closed = False
        self._note_reason: str | None = None
        self._note_decision: str | None = None
        self._resolved_at = -1  # len(records) when the last resolution was written
        self._exchanges: list[_Exchange] = []
        self._lock = threading.RLock()
        self._token: contextvars.Token[Operation | None] | None = None
        saved = inst.state.get(self.intent_id)
        if saved is None:
            self.operation_id = new_id("op")
            self.idempotency_key = idempotency_key or derive_key(self.operation_id)
            self.opened_at = time.time()
            self.owner = inst.recorder.session_id
            self._save()  # persisted before anything is logged or dispatched
            self._log_operation()
        else:
            self._restore(saved)

    # -- what the agent reads ------------------------------------------------------------------------

    @property
    def attempts(self) -> list[AttemptRecord]:
        return [r for r in self.records if isinstance(r, AttemptRecord)]

    @property
    def observations(self) -> list[ObservationRecord]:
        return [r for r in self.records if isinstance(r, ObservationRecord)]

    @property
    def last_attempt(self) -> AttemptRecord | None:
        attempts = self.attempts
        return attempts[-1] if attempts else None

    @property
    def effect_refs(self) -> list[str]:
        """The effect refs the evidence names so far: the last 2xx answer's, or a lookup that found them."""
        return decide_resolution(self.records).effect_refs

    @property
    def effect_ref(self) -> str | None:
        refs = self.effect_refs
        return refs[0] if refs else None

    @property
    def done(self) -> bool:
        """True once a resolution is logged (in this run, or by an earlier run of the agent)."""
        return self.state is not None

    @property
    def retry_after(self) -> float | None:
        """The Retry-After (seconds) of the last attempt, when it was a 429 that named one."""
        last = self.last_attempt
        return last.retry_after_seconds if last is not None and last.http_status == 429 else None

    # -- what the agent tells ------------------------------------------------------------------------

    def next_retry(self, reason: str | None = None, decision: str | None = None,
                   max_attempts: int | None = None) -> None:
        """Annotate the next attempt (the hooks of tenacity and backoff call this): ``decision`` in words,
        ``reason`` from the closed vocabulary to replace the one read from the wire (only
        ``credential_refreshed`` and ``operator_requested`` are causes the wire cannot show), and the
        attempt budget when the retry library knows it and the operation was not given one."""
        if reason is not None:
            from harness.events import RETRY_REASONS

            if reason not in RETRY_REASONS:
                raise ValueError(f"retry reason {reason!r}; valid: {', '.join(RETRY_REASONS)}")
        with self._lock:
            self._note_reason = reason or self._note_reason
            if decision:
                self._note_decision = decision
            if max_attempts is not None and not self._explicit_budget:
                self.max_attempts = max_attempts

    def observe(self, *, found: bool | None, effect_refs: Iterable[str] = (), source: str = "lookup",
                method: str | None = None, path: str | None = None, lag_possible: bool | None = None,
                **extra: Any) -> str:
        """Log an observation the agent made itself (an operator's look, a callback, a read by other means);
        returns its id. ``found``: True the effect exists, False the destination answered and found nothing,
        None no answer (no evidence either way)."""
        with self._lock:
            self._close_exchanges()
            record = ObservationRecord(new_id("obs"), time.time(), source, found, [str(r) for r in effect_refs],
                                       lag_possible if found is False else None)
            self._log_observation(record, method=method, path=path, **extra)
            return record.observation_id

    def resolve(self, state: str, *, effect_refs: Iterable[str] | None = None, evidence: Iterable[str] | None = None,
                reason: str | None = None, **extra: Any) -> None:
        """Resolve the operation explicitly. Left out, ``effect_refs`` and ``evidence`` are what the records
        support for that state. The scope then writes no resolution of its own, unless more happens after."""
        with self._lock:
            self._close_exchanges()
            auto_state, refs, cited, why = decide_resolution(self.records)
            if effect_refs is None:
                effect_refs = refs if state in ("succeeded", "duplicate_effect_confirmed") else []
            if evidence is None:
                evidence = cited if state == auto_state else _all_ids(self)
            self._log_resolution(state, list(effect_refs), list(evidence), reason or why, **extra)

    # -- the scope -----------------------------------------------------------------------------------

    def __enter__(self) -> Operation:
        self._token = _CURRENT.set(self)
        with self.inst._lock:
            self.inst._open.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            with self._lock:
                self._close_exchanges()
                if len(self.records) > self._resolved_at:  # something happened since the last resolution
                    self._auto_resolve(exc)
        finally:
            self.closed = True
            with self.inst._lock:
                if self in self.inst._open:
                    self.inst._open.remove(self)
            if self._token is not None:
                _CURRENT.reset(self._token)

    def _auto_resolve(self, exc: BaseException | None) -> None:
        state, refs, evidence, why = decide_resolution(self.records)
        if state is None:
            log.warning("operation %s (intent %s) ended with no attempt and no evidence: no resolution logged",
                        self.operation_id, self.intent_id)
            return
        if exc is not None:
            why = f"{why} (the agent's code raised {type(exc).__name__})"
        extra: dict[str, Any] = {}
        if state == "duplicate_effect_confirmed":
            correction = new_id("op")
            self.inst.recorder.operation(
                correction, intent={"kind": "compensate_duplicate", "destination": self.destination,
                                    "params": {"effect_refs": refs[1:]}},
                correction_of_operation_id=self.operation_id, owner="operator")
            extra["correction_operation_id"] = correction
        self._log_resolution(state, refs, evidence, why, **extra)

    # -- the wire (called by the patches) --------------------------------------------------------------

    def _begin(self, method: str, path: str, headers: dict[str, str],
               body: bytes | None) -> tuple[_Exchange | None, dict[str, str]]:
        role = self._role(method, path)
        if role is None:
            return None, {}
        with self._lock:
            self._close_exchanges()  # an earlier answer nobody read to its end: its outcome is what it got
            ex = _Exchange(self, role, method, path, sent_at=time.time())
            added: dict[str, str] = {}
            if role == "attempt":
                traceparent = headers.get(TRACEPARENT_HEADER)
                if traceparent in self.inst._injected:  # a request object sent again: a fresh one per attempt
                    traceparent = None
                if traceparent is None and self.inst.traceparent:
                    traceparent = added[TRACEPARENT_HEADER] = new_traceparent(self.operation_id)
                    self.inst._injected.add(traceparent)
                ex.attempt = self._new_attempt(method, path, headers, body, traceparent, ex.sent_at)
                self.records.append(ex.attempt)
                self._save()  # a kill from here on leaves the attempt to report on restart
            self._exchanges.append(ex)
            return ex, added

    def _role(self, method: str, path: str) -> str | None:
        lookup = self.contract.lookup
        if lookup is not None and method == lookup.method.upper() and path == lookup.path:
            return "lookup"
        status = self.contract.status
        if (status is not None and method == status.method.upper()
                and path_template_pattern(status.path).fullmatch(path)):
            return "status_poll"
        own = self.operation_contract
        if method in READ_METHODS and not (own is not None and own.method.upper() == method):
            collection = own.path if own is not None and own.path else None
            if collection and path_template_pattern(collection.rstrip("/") + "/{id}").fullmatch(path):
                return "read_after_write"
            return None  # some other read: no evidence about this operation, not an attempt either
        return "attempt"

    def _new_attempt(self, method: str, path: str, headers: dict[str, str], body: bytes | None,
                     traceparent: str | None, sent_at: float) -> AttemptRecord:
        previous = self.last_attempt
        number = len(self.attempts) + 1
        record = AttemptRecord(
            new_id("att"), sent_at, method, path, self._key_sent(headers, body), fingerprint_body(body),
            traceparent, number, max(0, self.max_attempts - number))
        if previous is not None:
            record.retry_of_attempt_id = previous.attempt_id
            record.retry_reason = self._note_reason or retry_reason_after(previous.dispatch_state, previous.http_status)
            record.prior_request_fingerprint = previous.request_fingerprint
            record.retry_decision = self._decision(previous, record)
        self._note_reason = self._note_decision = None
        return record

    def _key_sent(self, headers: dict[str, str], body: bytes | None) -> str | None:
        idem = self.contract.idempotency
        if idem.body_field:
            value = _body_params(body).get(idem.body_field)
            if value is not None:
                return str(value)
        return headers.get((idem.header or IDEMPOTENCY_HEADER).lower())

    def _decision(self, previous: AttemptRecord, record: AttemptRecord) -> str:
        """Why the retry may be safe, in words, from what the records show (not what the agent hoped)."""
        reason = record.retry_reason
        if reason == "connection_not_established":
            text = "retry: the previous attempt never left the machine"
        elif reason == "rate_limited":
            text = "retry: a 429 means the destination did not act"
        elif reason is None:
            text = (f"retry after an answer ({previous.http_status}) that leaves no retry reason: "
                    "the previous attempt was done or refused")
        else:
            seen = [r for r in self.records[self.records.index(previous) + 1:] if isinstance(r, ObservationRecord)]
            idem = self.contract.idempotency
            first = self.attempts[0].ts if self.attempts else record.ts
            within = idem.retention_seconds is None or record.ts - first < idem.retention_seconds
            if self.contract.deduplicates(self.kind) and record.idempotency_key and \
                    record.idempotency_key == previous.idempotency_key and within:
                text = "retry: destination deduplicates this idempotency key and it is within retention"
            elif seen and any(o.found is False and not o.lag_possible for o in seen):
                text = "retry: reconciliation lookup found no effect after waiting out index lag"
            elif seen:
                text = f"retry after {len(seen)} observation(s), none of them proof that nothing was done"
            else:
                text = "retry with no deduplication in force and no observation since the unknown attempt"
        return f"{text}; {self._note_decision}" if self._note_decision else text

    def _finish(self, ex: _Exchange, dispatch_state: str, error: str | None) -> None:
        with self._lock:
            if ex.finished:
                return
            ex.finished = True
            if ex in self._exchanges:
                self._exchanges.remove(ex)
            if ex.attempt is not None:
                self._finish_attempt(ex, dispatch_state, error)
            else:
                self._finish_read(ex, error if dispatch_state != "response_received" else None)

    def _finish_attempt(self, ex: _Exchange, dispatch_state: str, error: str | None) -> None:
        record = ex.attempt
        assert record is not None
        record.dispatch_state, record.error = dispatch_state, error
        if dispatch_state == "response_received":
            record.http_status = ex.status
            status = ex.status or 0
            if status == 429:
                record.retry_after_seconds = _retry_after(ex.headers.get("retry-after"))
            if 200 <= status < 300:
                body = parse_body(bytes(ex.body), ex.headers.get("content-type", ""))
                field_name = self.operation_contract.effect_ref_field if self.operation_contract else None
                ref = dig(body, field_name or "id")
                if status == 202 and isinstance(body, dict) and isinstance(body.get("operation"), dict):
                    record.status_url = str(body["operation"].get("status_url") or "") or None
                elif ref is not None and not isinstance(ref, (dict, list)):
                    record.effect_refs = [str(ref)]
        self._log_attempt(record)

    def _finish_read(self, ex: _Exchange, error: str | None) -> None:
        found: bool | None = None
        refs: list[str] = []
        status_text: str | None = None
        detail = f"lookup failed: {error}" if error else f"HTTP {ex.status}"
        ok = error is None and ex.status is not None and 200 <= ex.status < 300
        body = parse_body(bytes(ex.body), ex.headers.get("content-type", "")) if ok else None
        field_name = (self.operation_contract.effect_ref_field if self.operation_contract else None) or "id"
        if ex.role == "lookup" and ok and self.contract.lookup is not None:
            items = body.get(self.contract.lookup.result_field or LOOKUP_RESULT_FIELD) \
                if isinstance(body, dict) else None
            if isinstance(items, list):
                refs = [str(ref) for ref in (dig(item, field_name) for item in items) if ref is not None]
                found = bool(refs)
        elif ex.role == "status_poll" and ok and isinstance(body, dict) and isinstance(body.get("status"), str):
            status_text = body["status"]
            found = status_text == "succeeded"
            refs = [str(body["effect_ref"])] if found and body.get("effect_ref") is not None else []
            detail = f"operation is {status_text}"
        elif ex.role == "read_after_write" and error is None:
            ref = dig(body, field_name) if ok else None
            if ok and ref is not None:
                found, refs = True, [str(ref)]
            elif ex.status == 404:
                found = False
        lag_possible = None  # a pending status poll is not a negative search: no lag to speak of
        if found is False and ex.role == "lookup":
            lag_possible = self._within_lag()
        elif found is False and ex.role == "read_after_write":
            lag_possible = False  # a read by id does not lag
        record = ObservationRecord(new_id("obs"), time.time(), ex.role if ex.role != "lookup" else "lookup",
                                   found, refs, lag_possible, status_text)
        self._log_observation(record, method=ex.method, path=ex.path, detail=detail)

    def _within_lag(self) -> bool:
        """True while a negative lookup may only mean the index has not caught up (the reference agent's
        margin: 1.5 times the documented lag after the last attempt that left)."""
        lag = self.contract.lookup.lag_seconds if self.contract.lookup is not None else None
        sent = [a.ts for a in self.attempts if a.dispatch_state != "not_sent"]
        return bool(lag) and bool(sent) and time.time() - sent[-1] < float(lag or 0.0) * 1.5

    def _close_exchanges(self) -> None:
        """Answers whose body was never read to its end: logged with what they got."""
        for ex in list(self._exchanges):
            ex.done()

    # -- the log and the state dir -----------------------------------------------------------------

    def _log_operation(self) -> None:
        superseded = self.inst.state.get(str(self.intent.get("supersedes") or ""), {}).get("operation_id")
        self.inst.recorder.operation(
            # the key declared is the agent's word only: the default one is offered, and an agent may send a key of
            # its own; each attempt logs the key its request carried, and H002 holds those equal to one another
            self.operation_id, intent_id=self.intent_id, intent=self.intent, idempotency_key=self._declared_key,
            payload_fingerprint=fingerprint(self._payload) if self._payload is not None else None,
            supersedes_operation_id=superseded, owner=self.owner)

    def _log_attempt(self, record: AttemptRecord) -> None:
        self.inst.recorder.attempt(
            self.operation_id, record.attempt_id, record.dispatch_state or "sent_no_response", ts=record.ts,
            attempt_number=record.attempt_number, destination=self.destination, method=record.method,
            path=record.path, idempotency_key=record.idempotency_key,
            request_fingerprint=record.request_fingerprint, http_status=record.http_status,
            effect_refs=record.effect_refs or None, retry_after_seconds=record.retry_after_seconds,
            error=record.error, traceparent=record.traceparent,
            attempt_budget_remaining=record.budget_remaining, retry_of_attempt_id=record.retry_of_attempt_id,
            retry_reason=record.retry_reason, retry_decision=record.retry_decision,
            prior_request_fingerprint=record.prior_request_fingerprint)
        record.logged = True
        self._save()

    def _log_observation(self, record: ObservationRecord, **fields: Any) -> None:
        self.inst.recorder.observation(
            self.operation_id, record.observation_id, source=record.source, found=record.found,
            effect_refs=record.effect_refs, lag_possible=record.lag_possible, **fields)
        self.records.append(record)  # after the log: a resolution cites only what is logged
        self._save()

    def _log_resolution(self, state: str, refs: list[str], evidence: list[str], reason: str, **extra: Any) -> None:
        self.inst.recorder.resolution(self.operation_id, state, effect_refs=refs, evidence=evidence,
                                      reason=reason, **extra)
        self.state = state
        self._resolved_at = len(self.records)
        self._save()

    def _save(self) -> None:
        self.inst.state[self.intent_id] = {
            "operation_id": self.operation_id, "idempotency_key": self.idempotency_key,
            "opened_at": self.opened_at, "owner": self.owner, "resolved": self.state,
            "resolved_at": self._resolved_at, "max_attempts": self.max_attempts,
            "records": [{"type": "attempt" if isinstance(r, AttemptRecord) else "observation", **asdict(r)}
                        for r in self.records]}
        self.inst.save()

    def _restore(self, saved: dict[str, Any]) -> None:
        """An earlier run of the agent opened this operation: take it up where that run stopped."""
        self.operation_id = saved["operation_id"]
        self.idempotency_key = saved["idempotency_key"]
        self.opened_at = float(saved["opened_at"])
        self.owner = saved.get("owner") or self.inst.recorder.session_id
        if not self._explicit_budget:
            self.max_attempts = int(saved.get("max_attempts") or DEFAULT_MAX_ATTEMPTS)
        for data in saved.get("records", []):
            kind = data.pop("type")
            self.records.append(AttemptRecord(**data) if kind == "attempt" else ObservationRecord(**data))
        self.state = saved.get("resolved")
        self._resolved_at = int(saved.get("resolved_at", -1))
        logged = self.inst.logged
        if ("operation", self.operation_id) not in logged:  # saved, then killed before it was logged
            self._log_operation()
        for record in self.attempts:
            if record.logged:
                continue
            earlier = logged.get(("attempt", record.attempt_id))
            if earlier is not None:  # logged, then killed before that was saved
                record.dispatch_state = earlier.get("dispatch_state")
                record.http_status = earlier.get("http_status")
                record.effect_refs = list(earlier.get("effect_refs") or [])
                record.logged = True
            else:  # the request may have left; the answer, if any, went with the killed process
                record.dispatch_state = "sent_no_response"
                record.error = "agent restarted while this attempt was in flight"
                self._log_attempt(record)
        resolution = logged.get(("resolution", self.operation_id))
        if self.state is None and resolution is not None:  # logged, then killed before that was saved
            self.state = resolution.get("state")
            self._resolved_at = len(self.records)
        self._save()


# -- the records' ids ----------------------------------------------------------------------------------

def _all_ids(op: Operation) -> list[str]:
    return [r.attempt_id if isinstance(r, AttemptRecord) else r.observation_id for r in op.records]


# -- hooks for retry libraries ---------------------------------------------------------------------

def tenacity_before_sleep(retry_state: Any) -> None:
    """tenacity's ``before_sleep=``: the next attempt carries tenacity's decision (attempt n of N, what
    failed, the wait) and, when ``stop_after_attempt`` is used and the operation has no explicit budget,
    that budget. The retry link and reason come from the wire: the hook cannot make them lie."""
    op = current_operation()
    if op is None:
        return
    outcome = getattr(retry_state, "outcome", None)
    failure = outcome.exception() if outcome is not None and outcome.failed else None
    what = _describe(failure) if failure is not None else f"result {_short(repr(outcome.result()))}" \
        if outcome is not None else "no outcome"
    stop = getattr(getattr(retry_state, "retry_object", None), "stop", None)
    limit = getattr(stop, "max_attempt_number", None)
    sleep = getattr(getattr(retry_state, "next_action", None), "sleep", None)
    number = getattr(retry_state, "attempt_number", "?")
    decision = f"tenacity: call {number}{f' of {limit}' if limit else ''} ended with {what}" + \
        (f"; retrying in {float(sleep):.2f} s" if sleep is not None else "")
    op.next_retry(decision=decision, max_attempts=int(limit) if isinstance(limit, int) else None)


def tenacity_wait_retry_after(fallback: Callable[[Any], float] | None = None,
                              cap: float = 30.0) -> Callable[[Any], float]:
    """A tenacity ``wait=`` that waits the Retry-After of the operation's last 429 (capped), else ``fallback``
    (a tenacity wait, e.g. ``wait_exponential()``; default no wait)."""
    def wait(retry_state: Any) -> float:
        op = current_operation()
        asked = op.retry_after if op is not None else None
        if asked is not None:
            return min(asked, cap)
        return float(fallback(retry_state)) if fallback is not None else 0.0
    return wait


def backoff_on_backoff(details: Mapping[str, Any], max_tries: int | None = None) -> None:
    """backoff's ``on_backoff=`` handler: the next attempt carries backoff's decision (try n, what failed,
    the wait). ``functools.partial(backoff_on_backoff, max_tries=N)`` also gives the attempt budget."""
    op = current_operation()
    if op is None:
        return
    failure = details.get("exception")
    what = _describe(failure) if isinstance(failure, BaseException) else \
        f"result {_short(repr(details.get('value')))}"
    wait = details.get("wait")
    decision = f"backoff: try {details.get('tries', '?')}{f' of {max_tries}' if max_tries else ''} ended with " \
        f"{what}" + (f"; retrying in {float(wait):.2f} s" if wait is not None else "")
    op.next_retry(decision=decision, max_attempts=max_tries)


# -- the patches -----------------------------------------------------------------------------------

def _patch_urllib3() -> list[Callable[[], None]]:
    try:
        import urllib3.connectionpool
        import urllib3.response
        from urllib3.exceptions import ConnectTimeoutError, ProxyError
    except ImportError:  # pragma: no cover - urllib3 is a dependency
        return []
    pool_class = urllib3.connectionpool.HTTPConnectionPool
    response_class = urllib3.response.HTTPResponse
    original_make_request = pool_class._make_request
    original_read = response_class.read
    original_read_chunked = response_class.read_chunked
    original_stream = response_class.stream

    def _make_request(pool: Any, conn: Any, method: str, url: str, body: Any = None, headers: Any = None,
                      *args: Any, **kwargs: Any) -> Any:
        inst = _ACTIVE
        if inst is None:
            return original_make_request(pool, conn, method, url, body, headers, *args, **kwargs)
        ex, added = inst.begin(method, pool.scheme, pool.host or "", pool.port, url,
                               headers or {}, body if isinstance(body, bytes) else
                               body.encode() if isinstance(body, str) else None)
        if ex is None:
            return original_make_request(pool, conn, method, url, body, headers, *args, **kwargs)
        if added:
            headers = {**(headers or {}), **added}
        stage = {"connect_failed": False}
        connect = conn.connect

        def tracked_connect() -> None:
            try:
                connect()
            except BaseException:
                stage["connect_failed"] = True
                raise

        conn.connect = tracked_connect  # the instance's: http.client and _validate_conn call self.connect()
        try:
            response = original_make_request(pool, conn, method, url, body, headers, *args, **kwargs)
        except BaseException as exc:
            never_left = stage["connect_failed"] or isinstance(exc, (ConnectTimeoutError, ProxyError))
            ex.failed("not_sent" if never_left else "sent_no_response", _describe(exc))
            raise
        finally:
            with contextlib.suppress(AttributeError):
                del conn.connect
        ex.answered(response.status, response.headers)
        # positional after headers: retries, timeout, chunked, response_conn, preload_content, ...
        if kwargs.get("preload_content", args[4] if len(args) > 4 else True):
            ex.feed(response.data)  # already read whole (urllib3's default)
            ex.done()
        else:
            response.__dict__["_harness_exchange"] = ex  # read() below feeds it and says when the body ended
        return response

    def _tracked(response: Any) -> _Exchange | None:
        ex = response.__dict__.get("_harness_exchange")
        return ex if ex is not None and not ex.finished else None

    def _ended(response: Any) -> bool:
        buffered = getattr(response, "_decoded_buffer", None)
        decoder = getattr(response, "_decoder", None)
        return bool(response.closed and not (buffered is not None and len(buffered))
                    and not (decoder is not None and getattr(decoder, "has_unconsumed_tail", False)))

    def read(self: Any, amt: int | None = None, decode_content: bool | None = None,
             cache_content: bool = False) -> bytes:
        ex = _tracked(self)
        if ex is None:
            return original_read(self, amt, decode_content, cache_content)
        try:
            data = original_read(self, amt, decode_content, cache_content)
        except Exception as exc:
            ex.broken(exc)
            raise
        ex.feed(data)
        if amt is None or not data or _ended(self):
            ex.done()
        return data

    def read_chunked(self: Any, amt: int | None = None, decode_content: bool | None = None) -> Iterator[bytes]:
        ex = _tracked(self)
        if ex is None:
            yield from original_read_chunked(self, amt, decode_content)
            return
        try:
            for data in original_read_chunked(self, amt, decode_content):
                ex.feed(data)
                yield data
        except Exception as exc:
            ex.broken(exc)
            raise
        ex.done()

    def stream(self: Any, amt: int | None = 2 ** 16, decode_content: bool | None = None) -> Iterator[bytes]:
        ex = _tracked(self)
        yield from original_stream(self, amt, decode_content)  # read()/read_chunked() feed the exchange
        if ex is not None:
            ex.done()

    pool_class._make_request = _make_request  # type: ignore[assignment,method-assign]
    response_class.read = read  # type: ignore[method-assign]
    response_class.read_chunked = read_chunked  # type: ignore[assignment,method-assign]
    response_class.stream = stream  # type: ignore[assignment,method-assign]

    def undo() -> None:
        pool_class._make_request = original_make_request  # type: ignore[method-assign]
        response_class.read = original_read  # type: ignore[method-assign]
        response_class.read_chunked = original_read_chunked  # type: ignore[method-assign]
        response_class.stream = original_stream  # type: ignore[method-assign]
    return [undo]


def _patch_httpx() -> list[Callable[[], None]]:
    try:
        import httpx
    except ImportError:
        return []
    never_left = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError,
                  httpx.UnsupportedProtocol)
    original_sync = httpx.HTTPTransport.handle_request
    original_async = httpx.AsyncHTTPTransport.handle_async_request

    def _begin(request: httpx.Request) -> tuple[_Exchange | None, dict[str, str]]:
        inst = _ACTIVE
        if inst is None:
            return None, {}
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = None
        url = request.url
        ex, added = inst.begin(request.method, url.scheme, url.host, url.port, url.path,
                               dict(request.headers.items()), body)
        for name, value in added.items():
            request.headers[name] = value
        return ex, added

    class _TrackedStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, ex: _Exchange) -> None:
            self._inner, self._ex = inner, ex

        def __iter__(self) -> Iterator[bytes]:
            try:
                for data in self._inner:
                    self._ex.feed(data)
                    yield data
            except Exception as exc:
                self._ex.broken(exc)
                raise
            self._ex.done()

        def close(self) -> None:
            self._ex.done()
            self._inner.close()

    class _TrackedAsyncStream(httpx.AsyncByteStream):
        def __init__(self, inner: Any, ex: _Exchange) -> None:
            self._inner, self._ex = inner, ex

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for data in self._inner:
                    self._ex.feed(data)
                    yield data
            except Exception as exc:
                self._ex.broken(exc)
                raise
            self._ex.done()

        async def aclose(self) -> None:
            self._ex.done()
            await self._inner.aclose()

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        ex, _ = _begin(request)
        if ex is None:
            return original_sync(self, request)
        try:
            response = original_sync(self, request)
        except BaseException as exc:
            ex.failed("not_sent" if isinstance(exc, never_left) else "sent_no_response", _describe(exc))
            raise
        ex.answered(response.status_code, response.headers)
        response.stream = _TrackedStream(response.stream, ex)
        return response

    async def handle_async_request(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        ex, _ = _begin(request)
        if ex is None:
            return await original_async(self, request)
        try:
            response = await original_async(self, request)
        except BaseException as exc:
            ex.failed("not_sent" if isinstance(exc, never_left) else "sent_no_response", _describe(exc))
            raise
        ex.answered(response.status_code, response.headers)
        response.stream = _TrackedAsyncStream(response.stream, ex)
        return response

    httpx.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]
    httpx.AsyncHTTPTransport.handle_async_request = handle_async_request  # type: ignore[method-assign]

    def undo() -> None:
        httpx.HTTPTransport.handle_request = original_sync  # type: ignore[method-assign]
        httpx.AsyncHTTPTransport.handle_async_request = original_async  # type: ignore[method-assign]
    return [undo]


# -- small helpers ---------------------------------------------------------------------------------

def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    scheme = (scheme or "http").lower()
    return scheme, host.lower().strip("[]"), port or (443 if scheme == "https" else 80)


def _body_params(body: bytes | None) -> dict[str, Any]:
    """The top-level fields of a JSON or form-encoded body."""
    if not body:
        return {}
    try:
        value = json.loads(body)
        return value if isinstance(value, dict) else {}
    except (ValueError, UnicodeDecodeError):
        pass
    try:
        return dict(parse_qsl(body.decode("ascii"), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return {}


def parse_body(body: bytes, content_type: str) -> Any:
    """A JSON body as data, an XML body as its element tree, anything else None."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        pass
    if "xml" in content_type or body.lstrip()[:1] == b"<":
        import xml.etree.ElementTree as ElementTree

        with contextlib.suppress(ElementTree.ParseError):
            return ElementTree.fromstring(body)
    return None


def dig(value: Any, path: str) -> Any:
    """``a.b.0.c`` in a JSON value, or the element path of local names in an XML tree (its text)."""
    if value is None:
        return None
    if hasattr(value, "iter") and hasattr(value, "tag"):  # an XML element
        node = value
        for name in path.split("."):
            node = next((child for child in node if str(child.tag).rsplit("}", 1)[-1] == name), None)
            if node is None:
                return None
        return (node.text or "").strip() or None
    for name in path.split("."):
        if isinstance(value, dict):
            value = value.get(name)
        elif isinstance(value, list) and name.isdigit() and int(name) < len(value):
            value = value[int(name)]
        else:
            return None
    return value


def _retry_after(value: str | None) -> float | None:
    """A Retry-After header as seconds: a number, or an HTTP date."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _describe(exc: BaseException) -> str:
    """An exception in words, short: its type and the innermost cause's (never headers or bodies)."""
    text = f"{type(exc).__name__}: {exc}"
    return _short(text)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
