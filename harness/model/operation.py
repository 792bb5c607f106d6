"""The operation model: the states an operation and an attempt go through, the steps that move them, who
may take each step, and what the wire and the ledger must show for it. Read this first.

An operation starts ``undeclared``. Its ``operation`` event (the agent committing to an intent, persisted
before any dispatch) makes it ``open``. Each attempt is one real execution; when its outcome *may have
acted without the client learning it* (``harness.model.outcome.may_have_acted``: no answer after the
request may have left, a 5xx, a 202/408/409/425, an MCP error result) the operation is ``in_doubt``
until an observation answers (a lookup, a poll, a callback: evidence, never an attempt) or an operator
decides; when an answer (a 2xx other than 202) or an observation shows the effect, it is ``confirmed``
and only closing is left: executing it again needs an operator. A retry out of doubt needs the
destination's deduplication in force (the same key, within its retention), reconciliation, or an
approval: backoff does not make an unknown write safe. A resolution
moves the operation to its logged state; ``unknown`` may be revisited on new evidence, the other states
are final (only a reconciliation that finds two effects may move a final state, to
``duplicate_effect_confirmed``). Nothing is rewritten: an attempt's dispatch state, once it says the
request left, stays what it said.

``TRANSITIONS`` is the table: one row per step and source state, with the target state, the actors who
may take it and what the evidence must show. ``ATTEMPT_STATES`` says how one attempt's logged dispatch
state may change when it is logged again; ``RETRY_REASONS`` what the retried attempt must have seen for
each reason of the closed vocabulary. The checker replays every operation's history through this table
(``harness.checker.history``) and names any step it does not allow (rule H060); docs/contract.md's
"The operation model" section is rendered from it (``render_markdown``, held equal by a test).

Standard library only: agent processes import the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.model.outcome import DISPATCH_STATES, OPEN_STATUSES, answered_5xx

# -- states ------------------------------------------------------------------------------------------
UNDECLARED = "undeclared"  # nothing logged yet for this operation id
OPEN = "open"  # declared; no write of unknown fate
IN_DOUBT = "in_doubt"  # the last write may have acted, and nothing since said what became of it
CONFIRMED = "confirmed"  # an answer (a 2xx, not 202) or an observation shows the effect: only closing is left
UNKNOWN = "unknown"  # resolved unknown: honestly left to new evidence or an operator
FINAL_STATES = ("succeeded", "failed", "cancelled", "duplicate_effect_confirmed")
RESOLUTION_STATES = ("succeeded", "failed", UNKNOWN, "cancelled", "duplicate_effect_confirmed")
STATES = (UNDECLARED, OPEN, IN_DOUBT, CONFIRMED, *RESOLUTION_STATES)
LIVE = (OPEN, IN_DOUBT, CONFIRMED)
DECLARED = (*LIVE, *RESOLUTION_STATES)

# -- actors ------------------------------------------------------------------------------------------
AGENT = "agent"  # the process that owns the operation (any of its sessions: a restart is the same owner)
WORKER = "worker"  # a process the owner delegated the operation to (it carries the owner's operation id)
OPERATOR = "operator"  # a person deciding: approvals, an operator's observation
ACTORS = (AGENT, WORKER, OPERATOR)

# What a history can show beside its steps: the facts a rule needs met to judge anything (``@rule(exercised=)``).
FACTS: dict[str, str] = {
    "sent": "an attempt logged as sent",
    "not_sent": "an attempt logged not_sent",
    "doubt": "an attempt that may have acted (outcome.may_have_acted)",
    "lost": "the wire lost an answer after forwarding the request",
    "rate_limited": "a 429 answer",
    "retry_after_doubt": "a retry of an attempt that may have acted",
    "negative_lookup": "an observation that found nothing",
    "reported": "a program without a log said what it told its caller of an intent (a report line, black-box)",
}

# The path of the model a step or fact lies on, as a report names what a scenario did not exercise.
PATHS: dict[str, str] = {
    "retry": "retry path", "retry_in_doubt": "retry path", "retry_after_doubt": "retry after doubt",
    "doubt": "lost or doubtful answers", "lost": "lost or doubtful answers", "rate_limited": "rate limiting",
    "negative_lookup": "negative lookups", "approve": "approvals", "hand_off": "delegation", "restart": "restarts",
    "not_sent": "unsent attempts", "supersede": "changed payloads", "resolve:succeeded": "closures",
    "sent": "dispatch", "attempt": "dispatch", "observe": "reconciliation", "observe_inconclusive": "reconciliation",
}

# -- steps: what an audit event does to an operation ---------------------------------------------------
STEPS: dict[str, tuple[str, str]] = {  # step -> (the event that carries it, what it is)
    "declare": ("operation", "the agent commits to an intent, before any dispatch"),
    "redeclare": ("operation", "the operation logged again (a restart resuming it)"),
    "hand_off": ("any", "a worker's first event: it takes up the owner's operation under the owner's id"),
    "correct": ("operation", "a new operation correcting a confirmed duplicate; it waits for an operator"),
    "supersede": ("operation", "a new operation replacing another whose payload changed"),
    "restart": ("any", "an event of a new session of the owner: the agent restarted"),
    "attempt": ("attempt", "the first real execution"),
    "retry": ("attempt", "another execution, after an answer that settled nothing"),
    "retry_in_doubt": ("attempt", "another execution while an earlier one may have acted"),
    "relog_attempt": ("attempt", "an attempt logged again (before and after dispatch)"),
    "observe": ("observation", "evidence that says what became of the writes (found, or absent for sure)"),
    "observe_inconclusive": ("observation", "a lookup that may lag, or got no answer: it proves nothing"),
    "approve": ("approval", "an operator's decision"),
    "resolve": ("resolution", "the agent closes the operation, or leaves it unknown"),
}


def exercise_tags() -> tuple[str, ...]:
    """Everything a rule's ``exercised`` may name: a step, a fact, or ``resolve:<state>``."""
    return (*STEPS, *FACTS, *("resolve:" + state for state in RESOLUTION_STATES))


@dataclass(frozen=True)
class Transition:
    """One row of the model: taking ``step`` from one of ``sources`` leads to ``target`` ("=" stays, "*" is
    decided by the event: the attempt's outcome, the resolution's state), by one of ``actors``, when
    ``requires`` holds (in words; the checker's replay checks each)."""

    step: str
    sources: tuple[str, ...]
    target: str
    actors: tuple[str, ...]
    requires: str

    @property
    def label(self) -> str:
        """The row's name: its step, and where the step has several rows, the states it leaves."""
        if sum(t.step == self.step for t in TRANSITIONS) == 1:
            return self.step
        return f"{self.step} from {states_text(self.sources)}"


def states_text(states: tuple[str, ...]) -> str:
    """A set of states as the docs and the coverage name it."""
    named = {FINAL_STATES: "a final state", DECLARED: "any declared state", LIVE: "open, in_doubt or confirmed"}
    return named.get(states) or " or ".join(states)


TRANSITIONS: tuple[Transition, ...] = (
    Transition("declare", (UNDECLARED,), OPEN, (AGENT,),
               "nothing of the operation was logged before it"),
    Transition("correct", (UNDECLARED,), OPEN, (AGENT,),
               "the operation it corrects was resolved duplicate_effect_confirmed"),
    Transition("supersede", (UNDECLARED,), OPEN, (AGENT,),
               "the operation it supersedes is in the log"),
    Transition("redeclare", DECLARED, "=", (AGENT, WORKER), "the same intent as the first declaration"),
    Transition("hand_off", LIVE, "=", (WORKER,), "the owner's operation id and intent"),
    Transition("restart", DECLARED, "=", (AGENT,), "the restarted agent resumes the same operation id"),
    Transition("attempt", (OPEN,), "*", (AGENT, WORKER),
               "the wire agrees with the logged dispatch state: not_sent, nothing forwarded; sent, the journal "
               "saw the request; response_received, the client got an answer"),
    Transition("retry", (OPEN,), "*", (AGENT, WORKER),
               "names the attempt it retries and a reason that attempt's outcome gives (RETRY_REASONS)"),
    Transition("retry_in_doubt", (IN_DOUBT,), "*", (AGENT, WORKER),
               "deduplication in force (the doubted attempt's key, on a destination that deduplicates, or a "
               "set_state command's declared convergence), or an operator's approval since the doubt"),
    Transition("retry", (CONFIRMED, UNKNOWN), "*", (AGENT, WORKER),
               "an operator's approval since the effect was confirmed or the operation resolved unknown: the "
               "model never re-executes what is done, nor an unknown write on the agent's own say"),
    Transition("relog_attempt", DECLARED, "=", (AGENT, WORKER),
               "the dispatch state moves only as ATTEMPT_STATES allows: history is appended, never rewritten"),
    Transition("observe", DECLARED, "*", (AGENT, WORKER, OPERATOR),
               "a read the journal saw answered 2xx where it crossed the proxy; found effects the ledger holds"),
    Transition("observe_inconclusive", DECLARED, "=", (AGENT, WORKER, OPERATOR), "nothing"),
    Transition("approve", DECLARED, "=", (OPERATOR,), "nothing"),
    Transition("resolve", (OPEN, UNKNOWN), "*", (AGENT, WORKER),
               "succeeded: the ledger holds the effect; failed or cancelled: the ledger holds none; "
               "duplicate_effect_confirmed: the ledger holds more than one"),
    Transition("resolve", (CONFIRMED,), "*", (AGENT, WORKER),
               "succeeded, unknown or duplicate_effect_confirmed: never failed or cancelled once the effect is shown"),
    Transition("resolve", (IN_DOUBT,), "*", (AGENT, WORKER),
               "unknown, or succeeded or duplicate_effect_confirmed on the ledger's effects: never failed or "
               "cancelled while a write may have acted"),
    Transition("resolve", FINAL_STATES, "*", (AGENT, WORKER),
               "the same state again, or duplicate_effect_confirmed when reconciliation found a second effect"),
)

# An attempt logged again: from its logged dispatch state (None: not logged yet) to the states it may take.
ATTEMPT_STATES: dict[str | None, tuple[str, ...]] = {
    None: DISPATCH_STATES,
    "not_sent": DISPATCH_STATES,  # logged before dispatch, then with its outcome
    "sent_no_response": ("sent_no_response",),
    "response_received": ("response_received",),
    "execution_error": ("execution_error", "sent_no_response", "response_received"),
}

# An engine's rerun of the same workflow or task identity (docs/durable.md): it happens whatever the first run logged
# (its process may have died before it could log more), so any logged outcome gives it; it is judged as any retry,
# out of doubt only under the same key on a destination that deduplicates, after reconciliation, or with an approval.
ENGINE_RERUNS: dict[str, str] = {
    "task_redelivered": "anything: a queue delivered the task again (its worker died before the ack, or its lease "
                        "or visibility timeout expired while it ran)",
    "activity_retry": "anything: a workflow engine ran the activity again (it raised, timed out, or its worker died)",
    "step_retry": "anything: a durable-execution engine ran the step again (it raised, or its process died and the "
                  "workflow recovered)",
}
# A retry's reason, and what the attempt it retries must have logged for that reason to hold.
RETRY_REASONS: dict[str, str] = {
    "connection_not_established": "not_sent or execution_error",
    "rate_limited": "a 429 (or a 503) answer",
    "destination_5xx": "a 5xx answer, or an MCP error result (the tool's 5xx)",
    "response_lost_after_dispatch": "sent_no_response or execution_error, or a 202/408/409/425 answer",
    "credential_refreshed": "a 401 or 403 answer",
    "operator_requested": "an approval logged before the retry",
    **ENGINE_RERUNS,
}


def retry_reason_fits(reason: str, dispatch_state: str | None, http_status: object, approved: bool, *,
                      tool_error: bool = False) -> bool:
    """Whether the retried attempt's logged outcome gives ``reason`` (see ``RETRY_REASONS``); ``tool_error``: it
    got an MCP error result (answered 200 on HTTP, but the call failed, maybe after committing, as a 5xx)."""
    status = http_status if isinstance(http_status, int) and not isinstance(http_status, bool) else None
    answered = dispatch_state == "response_received"
    if reason == "connection_not_established":
        return dispatch_state in ("not_sent", "execution_error")
    if reason == "rate_limited":
        return answered and status in (429, 503)
    if reason == "destination_5xx":
        return answered and (answered_5xx(status) or tool_error)
    if reason == "response_lost_after_dispatch":  # or an answer that leaves the first request running (409...)
        return dispatch_state in ("sent_no_response", "execution_error") or (answered and status in OPEN_STATUSES)
    if reason == "credential_refreshed":
        return answered and status in (401, 403)
    if reason == "operator_requested":
        return approved
    if reason in ENGINE_RERUNS:  # the engine's decision, whatever the first run got to log
        return True
    return False  # outside the closed vocabulary: H008 names it


def transitions_from(state: str, step: str) -> list[Transition]:
    return [t for t in TRANSITIONS if t.step == step and state in t.sources]


def allowed_steps(state: str) -> list[str]:
    """The steps the model allows from ``state``, for a finding's message."""
    return list(dict.fromkeys(t.step for t in TRANSITIONS if state in t.sources))


def render_markdown() -> str:
    """The model as docs/contract.md shows it (a test holds the two equal)."""
    lines = ["| step | event | from | to | who | requires |", "|---|---|---|---|---|---|"]
    for t in TRANSITIONS:
        target = {"=": "(stays)", "*": "(by the event)"}.get(t.target, t.target)
        lines.append(f"| {t.step} | {STEPS[t.step][0]} | {states_text(t.sources)} | {target} | "
                     f"{', '.join(t.actors)} | {t.requires} |")
    lines += ["", "| a retry's reason | the retried attempt logged |", "|---|---|"]
    lines += [f"| {reason} | {what} |" for reason, what in RETRY_REASONS.items()]
    lines += ["", "| an attempt logged as | may be logged again as |", "|---|---|"]
    lines += [f"| {state or '(first time)'} | {', '.join(nxt)} |" for state, nxt in ATTEMPT_STATES.items()]
    return "\n".join(lines) + "\n"
