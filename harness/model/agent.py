"""The agent side of the model: what an agent decides from its own operation's history, one definition each.

- ``derive_key(operation_id)``: the operation's idempotency key (derived from the operation, never from an
  attempt, so every attempt of it carries the same key); ``traceparent(operation_id)``: a W3C traceparent
  whose trace id is the operation's and whose span id is new for each attempt.
- ``may_have_acted(dispatch_state, http_status, tool_error=)`` (harness.model.outcome): the attempt may have
  acted without the client learning that it did; ``succeeded(...)``: the answer says it did.
- ``retry_reason_after(...)``: the retry reason (the closed vocabulary) that what an attempt saw gives the
  next one.
- ``decide_resolution(history)``: the resolution (state, effect refs, evidence ids, reason) an operation's
  attempts and observations support, in the order they happened; ``closing_resolution(history)`` the one a
  scope that must write a resolution writes (``unknown`` where there is nothing to resolve on).

Every agent-side implementation (harness.instrument, the reference agent, the framework tools' traced and
MCP scopes, the OpenTelemetry example) takes these from here; tests/model/test_agent_side.py holds them
equal. Standard library only: agent processes import it.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeGuard

from harness.model.outcome import (
    DISPATCH_STATES,
    OPEN_STATUSES,
    UNANSWERED_STATES,
    answered_5xx,
    may_have_acted,
    succeeded,
)

__all__ = [
    "DISPATCH_STATES",
    "KEY_PREFIX",
    "LOOKUP_SOURCES",
    "NOT_PROOF_4XX",
    "OPEN_STATUSES",
    "UNANSWERED_STATES",
    "UNCERTAIN_REASONS",
    "Attempt",
    "AttemptView",
    "Closing",
    "Observation",
    "ObservationView",
    "Resolution",
    "answered_5xx",
    "closing_resolution",
    "decide_resolution",
    "derive_key",
    "is_attempt",
    "may_have_acted",
    "observations_since_last_attempt",
    "retry_reason_after",
    "succeeded",
    "trace_id",
    "traceparent",
]

KEY_PREFIX = "idem_"
# An answer that does not prove the destination did not act, although it is a 4xx: 408 timeout, 409 still
# processing under this key, 425 too early, 429 rate limited (the request may be done later, or the first
# one still runs). Any other 4xx is a refusal: the destination did not act on that request.
NOT_PROOF_4XX = frozenset({408, 409, 425, 429})
# The retry reasons that say the attempt retried may have acted (the destination may hold its effect).
UNCERTAIN_REASONS = ("response_lost_after_dispatch", "destination_5xx")
# The observations that search the effect by client reference (their refs count as effects found).
LOOKUP_SOURCES = ("lookup", "read_after_write")


# -- identities ----------------------------------------------------------------------------------------

def derive_key(operation_id: str) -> str:
    """The idempotency key of an operation: a hash of its id, the same for every attempt of it."""
    return KEY_PREFIX + hashlib.sha256(operation_id.encode()).hexdigest()[:24]


def trace_id(operation_id: str) -> str:
    """The W3C trace id of an operation: every attempt of it is a span of one trace."""
    return hashlib.sha256(operation_id.encode()).hexdigest()[:32]


def traceparent(operation_id: str) -> str:
    """A traceparent for one attempt: the operation's trace id, a fresh span id."""
    return f"00-{trace_id(operation_id)}-{secrets.token_hex(8)}-01"


# -- what an attempt says --------------------------------------------------------------------------------

def retry_reason_after(dispatch_state: str | None, http_status: object = None, *,
                       tool_error: bool = False) -> str | None:
    """The retry reason that what the previous attempt saw gives the next one (the closed vocabulary of
    harness.events.RETRY_REASONS); None after a 2xx, a 202 or a definitive refusal: no reason applies."""
    if dispatch_state == "not_sent":
        return "connection_not_established"
    if dispatch_state != "response_received":
        return "response_lost_after_dispatch"
    if tool_error or answered_5xx(http_status):  # an error result, like a 5xx, may follow a commit
        return "destination_5xx"
    if http_status == 429:
        return "rate_limited"
    if http_status in OPEN_STATUSES and http_status != 202:  # the first request may still act under this key
        return "response_lost_after_dispatch"
    if http_status in (401, 403):
        return "credential_refreshed"
    return None


# -- the inputs of a resolution ----------------------------------------------------------------------------

class AttemptView(Protocol):
    """An attempt as the resolution reads it (harness.instrument's AttemptRecord, ``Attempt`` below...)."""

    @property
    def attempt_id(self) -> str: ...
    @property
    def dispatch_state(self) -> str | None: ...
    @property
    def http_status(self) -> int | None: ...
    @property
    def tool_error(self) -> bool: ...
    @property
    def effect_refs(self) -> list[str]: ...


class ObservationView(Protocol):
    """An observation as the resolution reads it: ``found`` True (the effect exists), False (the destination
    answered and found nothing), None (no answer); ``status`` the reported status of a status poll."""

    @property
    def observation_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def found(self) -> bool | None: ...
    @property
    def effect_refs(self) -> list[str]: ...
    @property
    def lag_possible(self) -> bool | None: ...
    @property
    def status(self) -> str | None: ...


Record = AttemptView | ObservationView


@dataclass
class Attempt:
    """An attempt as an agent keeps it (the framework tools' scopes, the OpenTelemetry example)."""

    attempt_id: str
    dispatch_state: str | None = None  # None while in flight
    http_status: int | None = None
    tool_error: bool = False
    effect_refs: list[str] = field(default_factory=list)
    error: str | None = None
    ts: float = field(default_factory=time.time)  # when it was sent (a lookup's wait for the lag counts from it)

    @property
    def uncertain(self) -> bool:
        return may_have_acted(self.dispatch_state, self.http_status, tool_error=self.tool_error)

    @property
    def succeeded(self) -> bool:
        return succeeded(self.dispatch_state, self.http_status, tool_error=self.tool_error)


@dataclass
class Observation:
    """An observation as an agent keeps it."""

    observation_id: str
    source: str = "lookup"
    found: bool | None = None
    effect_refs: list[str] = field(default_factory=list)
    lag_possible: bool | None = None
    status: str | None = None
    ts: float = field(default_factory=time.time)


def is_attempt(record: Record) -> TypeGuard[AttemptView]:
    return hasattr(record, "attempt_id")


def _is_observation(record: Record) -> TypeGuard[ObservationView]:
    return not hasattr(record, "attempt_id")


def _id(record: Record) -> str:
    return record.attempt_id if is_attempt(record) else record.observation_id  # type: ignore[union-attr]


def _acted(attempt: AttemptView) -> bool:
    return may_have_acted(attempt.dispatch_state, attempt.http_status, tool_error=attempt.tool_error)


def _done(attempt: AttemptView) -> bool:
    return succeeded(attempt.dispatch_state, attempt.http_status, tool_error=attempt.tool_error)


def observations_since_last_attempt(history: Sequence[Record]) -> list[ObservationView]:
    """The observations made after the last attempt (all of them when there is no attempt)."""
    last = max((i for i, r in enumerate(history) if is_attempt(r)), default=-1)
    return [r for r in history[last + 1:] if _is_observation(r)]


# -- the resolution ----------------------------------------------------------------------------------------

class Resolution(NamedTuple):
    """What the evidence supports: ``state`` None when there is nothing to resolve on (no attempt, no
    observation); ``evidence`` the ids of the attempts and observations that prove it."""

    state: str | None
    effect_refs: list[str]
    evidence: list[str]
    reason: str


def decide_resolution(history: Sequence[Record]) -> Resolution:
    """The resolution an operation's history supports; ``history`` its attempts and observations in the
    order they happened. In order of precedence:

    - lookups (or reads after write) after the last attempt that found more than one effect, with the last
      2xx's: ``duplicate_effect_confirmed``; one effect: ``succeeded`` on the lookup;
    - the last attempt succeeded (a 2xx other than 202): ``succeeded``;
    - the last attempt was a 202 and a status poll since reported it succeeded, or failed;
    - the last attempt proves nothing was done (a 4xx other than NOT_PROOF_4XX, not sent, a 429) and no
      attempt may have acted unseen, or a lookup with ``lag_possible`` False after the last attempt that
      may have, found nothing: ``failed``; such a lookup alone also makes it ``failed``;
    - else ``unknown`` (never ``failed`` when the truth may be an effect), citing everything.
    """
    if not history:
        return Resolution(None, [], [], "nothing was attempted")
    positions = [i for i, r in enumerate(history) if is_attempt(r)]
    attempts = [r for r in history if is_attempt(r)]
    last = attempts[-1] if attempts else None
    after = observations_since_last_attempt(history)
    found = [o for o in after if o.found and o.effect_refs]
    lookups = [o for o in found if o.source in LOOKUP_SOURCES]
    refs = sorted({r for o in lookups for r in o.effect_refs})
    if last is not None and _done(last):
        refs = sorted(set(refs) | set(last.effect_refs))
    if len(refs) > 1:  # a success does not prove a single effect: the read back found more
        return Resolution("duplicate_effect_confirmed", refs, [lookups[-1].observation_id],
                          f"reconciliation found {len(refs)} records for one intent: {', '.join(refs)}")
    if lookups:
        return Resolution("succeeded", refs, [lookups[-1].observation_id],
                          "lookup by client reference found the effect")
    if last is not None and _done(last):
        return Resolution("succeeded", refs, [last.attempt_id], f"destination answered {last.http_status}")
    polls = [o for o in after if o.source == "status_poll" and o.found is not None]
    if last is not None and last.http_status == 202 and polls:
        poll = polls[-1]
        if poll.found:
            return Resolution("succeeded", list(poll.effect_refs), [last.attempt_id, poll.observation_id],
                              "the accepted operation reported succeeded")
        if poll.status == "failed":
            return Resolution("failed", [], [last.attempt_id, poll.observation_id],
                              "the accepted operation reported failed")
    if last is None:
        if found:
            return Resolution("succeeded", sorted({r for o in found for r in o.effect_refs}),
                              [found[-1].observation_id], "an observation found the effect")
        return Resolution(None, [], [], "nothing was attempted")
    # the last attempt proved nothing was done: was an earlier one (or this one) left unknown?
    uncertain = [i for i, a in zip(positions, attempts, strict=True) if _acted(a)]
    absent: ObservationView | None = None
    if uncertain:
        since = [o for o in history[uncertain[-1] + 1:] if _is_observation(o)]
        absent = next((o for o in reversed(since) if o.source == "lookup" and o.found is False
                       and o.lag_possible is False), None)
    if not uncertain or absent is not None:
        cited = [absent.observation_id] if absent is not None else []
        if last.dispatch_state == "response_received" and not last.tool_error and \
                400 <= (last.http_status or 0) < 500 and last.http_status not in NOT_PROOF_4XX:
            return Resolution("failed", [], [last.attempt_id, *cited],
                              f"destination refused the request: {last.http_status}")
        if last.dispatch_state == "not_sent" or last.http_status == 429:
            why = "no attempt left the machine" if all(a.dispatch_state == "not_sent" for a in attempts) else \
                "no attempt was done by the destination"
            return Resolution("failed", [], [a.attempt_id for a in attempts] + cited, why)
        if absent is not None:
            return Resolution("failed", [], [absent.observation_id],
                              "a lookup after the index lag found no effect of the unknown attempt(s)")
    return Resolution("unknown", [], [_id(r) for r in history], _unknown_reason(last))


class Closing(NamedTuple):
    """A resolution that names a state (``closing_resolution``'s)."""

    state: str
    effect_refs: list[str]
    evidence: list[str]
    reason: str


def closing_resolution(history: Sequence[Record]) -> Closing:
    """The resolution a scope writes when it closes: ``decide_resolution``'s, and ``unknown`` citing everything
    where that has nothing to resolve on (lookups only, none of them found anything)."""
    state, refs, evidence, reason = decide_resolution(history)
    if state is not None:
        return Closing(state, refs, evidence, reason)
    return Closing("unknown", [], [_id(r) for r in history],
                   "nothing was attempted and nothing found the effect: the outcome is not known")


def _unknown_reason(last: AttemptView) -> str:
    if last.dispatch_state == "sent_no_response":
        what = f"the answer to {last.attempt_id} was lost ({getattr(last, 'error', None)})"
    elif last.dispatch_state == "response_received" and last.tool_error:
        what = f"{last.attempt_id} got an error result, which may follow a commit"
    elif last.dispatch_state == "not_sent" or last.http_status in NOT_PROOF_4XX or (last.http_status or 0) < 500:
        what = f"{last.attempt_id} proved nothing about an earlier attempt that may have acted"
    else:
        what = f"{last.attempt_id} got {last.http_status}, which may follow a commit"
    return f"{what}; nothing resolved it: the effect may exist, escalating to an operator"
