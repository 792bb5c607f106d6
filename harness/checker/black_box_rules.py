"""The black-box rules: a program that writes no audit log, judged per intent from the proxy journal and
the effect ledger alone (``harness.checker.attribution`` gives each write and effect to an intent).

They register with ``requires=("black_box",)``: they run only in black-box mode, and no other rule runs
there. An operation-scope black-box rule is a function of an ``IntentContext``; the run rule's
``finish`` gets the ``RunContext`` whose ``attribution`` is set. What this mode cannot judge at all
(operation ids, an unknown logged as unknown, a closure backed by evidence) is ``NOT_JUDGED``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.checker.attribution import IntentContext, WireAttempt, payload_prints, retry_after_seconds
from harness.checker.context import effect_ref_row
from harness.checker.registry import BLACK_BOX, RunRule, rule
from harness.checker.rules import ExitsZero, NoProxyBypass, NothingAfterExit
from harness.checker.run_context import RunContext
from harness.contract import AGENT_STDOUT_FILE

IntentFindings = Iterator[tuple[str, list[dict[str, Any]]]]

# More write attempts than this for one intent is a retry loop without a budget (H043): the bundled agents
# make 3 at most, the SDKs certified here 1 + their configured retries (stripe-python's 2, urllib3's 3).
MAX_WIRE_ATTEMPTS = 5
RETRY_AFTER_STATUSES = (429, 503)

# What black-box mode cannot answer, said in the verdict and the report (each once, in this order).
NOT_JUDGED = (
    "operation ids: whether one intent kept one operation id across attempts and restarts (H001, H032) needs the "
    "program's own record of its operations",
    "unknown logged as unknown: whether a lost response was recorded as sent_no_response rather than failed or "
    "not sent (H005, H006, H007) needs the program's record of each attempt",
    "evidence-backed closure: whether each intent was closed on evidence that proves its state (H015, H025, H026, "
    "H034), and what the program did about a duplicate it could not prevent (duplicate_effect_confirmed and its "
    "correction, H016), needs its resolutions",
    "retry reasons, links and budgets as the program states them (H008, H009, H024), reconciliation lookups "
    "(H010, H014, H027) and approvals (H035-H037): only the writes on the wire are seen",
)
NOT_JUDGED_STATES = ("the final state the scenario expects of each intent (expect.states): a program without an "
                     "audit log reports no state; the effect counts (expect.effects) are still judged")


def _refs(attempts: list[WireAttempt]) -> list[dict[str, Any]]:
    return [a.ref() for a in attempts]


def _effects_said(ctx: IntentContext) -> str:
    refs = ctx.effect_refs()
    return (f"the destination committed {len(refs)} effect(s){' (' + ', '.join(refs) + ')' if refs else ''} "
            f"for intent {ctx.intent_id}")


def _position(ctx: IntentContext, attempt: WireAttempt) -> int:
    """The attempt's index among the intent's (``IntentContext.position``: by identity, from an index; ``list.index``
    compared every field of every attempt before it, quadratic in a retry storm)."""
    return ctx.position(attempt)


def _named(attempt: WireAttempt, index: int) -> str:
    key = f"key {attempt.key}" if attempt.key else "no key"
    return f"attempt {index + 1} [flow {attempt.flow_id}, {key}]"


# --------------------------------------------------------------------------------------------- H040
def wire_tags(ctx: IntentContext) -> set[str]:
    """What an intent's writes on the wire showed, in the operation model's words (the rules' ``exercised``)."""
    tags: set[str] = {"attempt", "sent"} if ctx.attempts else set()
    doubted = False
    for index, attempt in enumerate(ctx.attempts):
        if index:
            tags.add("retry")
            if doubted:
                tags.add("retry_after_doubt")
        if attempt.unknown() is not None:
            tags.add("doubt")
            doubted = True
        if attempt.entry.get("client_status") in (429, 503):
            tags.add("rate_limited")
    if ctx.reports:
        tags.add("reported")
    return tags


@rule("H040", "wire-single-effect", requires=(BLACK_BOX,), exercised=("doubt", "retry"))
def wire_single_effect(ctx: IntentContext) -> IntentFindings:
    """One intent yields one distinct effect in the ledger, judged from the wire: effects committed by more
    than one of its writes are a duplicate (one write the network delivered twice is not the program's)."""
    refs = ctx.effect_refs()
    flows = ctx.committing_flows()
    if len(refs) > 1 and len(flows) > 1:
        committed = [a for a in ctx.attempts if a.flow_id in flows]
        yield (f"{_effects_said(ctx)}, by {len(flows)} of its {len(ctx.attempts)} write(s) on the wire: "
               f"{', '.join(_named(a, _position(ctx, a)) for a in committed)}; one intended effect, "
               f"{len(refs)} real ones", [effect_ref_row(r) for r in ctx.effects] + _refs(committed))


# --------------------------------------------------------------------------------------------- H041
@rule("H041", "wire-unknown-retry-keyed", requires=(BLACK_BOX,), exercised=("retry_after_doubt",))
def wire_unknown_retry_keyed(ctx: IntentContext) -> IntentFindings:
    """A retry of a write whose outcome the program could not know (its answer lost, timed out or reset, or a
    5xx) carries the key of the attempt it retries when the destination deduplicates on one (within its
    retention); where it does not deduplicate, a blind retry that left a second effect is flagged."""
    dedup = ctx.deduplicates()
    duplicate = len(ctx.effect_refs()) > 1 and len(ctx.committing_flows()) > 1
    # each retry is held against the latest earlier attempt whose outcome was unknown: a 429 in between changes
    # nothing, that attempt may still have acted
    unknown: WireAttempt | None = None
    for index, attempt in enumerate(ctx.attempts):
        if unknown is not None and not attempt.idempotent_method:
            said = _unsafe_retry(ctx, attempt, unknown, dedup, duplicate)
            if said is not None:
                after = (f"{_named(attempt, index)} retried {_named(unknown, _position(ctx, unknown))}, whose "
                         f"outcome the program could not know ({unknown.unknown()})")
                yield f"{after}, {said}; {_effects_said(ctx)}", _refs([unknown, attempt]) + (
                    [effect_ref_row(r) for r in ctx.effects] if not dedup else [])
        if attempt.unknown() is not None:
            unknown = attempt


def _unsafe_retry(ctx: IntentContext, attempt: WireAttempt, unknown: WireAttempt, dedup: bool | None,
                  duplicate: bool) -> str | None:
    """Why retrying ``unknown`` with ``attempt`` was unsafe, or None when it was not (or cannot be told)."""
    if dedup:
        where = f"{ctx.destination} deduplicates on {ctx.key_name()}"
        if not attempt.key:
            return f"without a key although {where}"
        if attempt.key != unknown.key:
            was = f"its key {unknown.key}" if unknown.key else "no key"
            return (f"with a changed key ({was}, then {attempt.key}) although {where}, so it cannot deduplicate "
                    "the retry")
        first = next(a for a in ctx.attempts if a.key == attempt.key)
        retention = ctx.retention_seconds()
        gap = attempt.sent_at - first.sent_at
        if retention is not None and gap > retention:
            return (f"with the same key {gap:.2f} s after the key was first sent (flow {first.flow_id}), past its "
                    f"{retention:g} s retention, so the destination no longer deduplicates it")
        return None
    if dedup is False and duplicate:
        return f"on {ctx.destination}, which does not deduplicate: a blind retry"
    return None


# --------------------------------------------------------------------------------------------- H042
@rule("H042", "wire-retry-after-honoured", requires=(BLACK_BOX,), exercised=("rate_limited",))
def wire_retry_after_honoured(ctx: IntentContext) -> IntentFindings:
    """After a 429 or 503 carrying Retry-After, the next attempt of the intent goes out no earlier than it
    asked, on the wire's clock (with H011's slack)."""
    for index, attempt in enumerate(ctx.attempts[1:], start=1):
        parent = ctx.attempts[index - 1]
        if parent.client_status not in RETRY_AFTER_STATUSES:
            continue
        wait = retry_after_seconds(parent.entry)
        if wait is None:
            continue
        waited = attempt.sent_at - parent.answered_at
        if waited + max(0.1, 0.05 * wait) < wait:  # slack for the clock reads around a sleep, as H011's
            yield (f"{_named(attempt, index)} went out {waited:.2f} s after the {parent.client_status} on "
                   f"{_named(parent, index - 1)} was answered, which asked to wait {wait:g} s (Retry-After "
                   f"{parent.entry.get('client_retry_after')!r}, as the journal records)", _refs([parent, attempt]))


# --------------------------------------------------------------------------------------------- H043
@rule("H043", "wire-retry-budget", requires=(BLACK_BOX,), exercised=("retry",))
def wire_retry_budget(ctx: IntentContext) -> IntentFindings:
    """An intent's writes on the wire stay within a retry budget: more than 5 attempts (MAX_WIRE_ATTEMPTS)
    is a loop without one; the count and the spacing are in the verdict either way."""
    if len(ctx.attempts) > MAX_WIRE_ATTEMPTS:
        gaps = ", ".join(f"{g:.2f}" for g in ctx.retry_gaps())
        yield (f"intent {ctx.intent_id} sent {len(ctx.attempts)} write attempts on the wire, past the budget of "
               f"{MAX_WIRE_ATTEMPTS} (retries spaced {gaps} s apart): a retry loop needs a bound; "
               f"{_effects_said(ctx)}", _refs(ctx.attempts))


# --------------------------------------------------------------------------------------------- H044
@rule("H044", "wire-key-payload-stable", requires=(BLACK_BOX,), exercised=("retry",))
def wire_key_payload_stable(ctx: IntentContext) -> IntentFindings:
    """One idempotency key is never sent over two payloads across an intent's retries (the destination's
    fingerprint of what it read, else the body's on the wire): a changed payload is a new operation."""
    for key, group in ctx.key_fingerprints().items():
        each = payload_prints(group)  # from one source, the destination's or the wire's
        prints = list(dict.fromkeys(p for p in each if p))
        changed = [a for a, p in zip(group, each, strict=True) if p and p != prints[0]]
        yield (f"key {key} of intent {ctx.intent_id} was sent over {len(prints)} payloads: "
               f"{', '.join(_named(a, _position(ctx, a)) for a in changed)} carried another body than flow "
               f"{group[0].flow_id} (the destination saw: {'; '.join(a.saw() for a in group)})", _refs(group))


# --------------------------------------------------------------------------------------------- H045
# --------------------------------------------------------------------------------------------- H049
def report_ref(report: dict[str, Any]) -> dict[str, Any]:
    """Evidence pointer to a report line of the program's stdout (what it told its caller)."""
    return {"source": "file", "path": AGENT_STDOUT_FILE, "line": report.get("_line"),
            "outcome": report.get("outcome"), "effect_ref": report.get("effect_ref")}


@rule("H049", "wire-caller-told-the-truth", requires=(BLACK_BOX,), exercised=("reported",))
def wire_caller_told_the_truth(ctx: IntentContext) -> IntentFindings:
    """What the program told its caller of an intent (its last report line, docs/contract.md "What the program
    told its caller") agrees with the ledger: an error reported while the destination committed the intent's
    effect invites the caller's own retry (a timeout, or an outcome said unknown, is honest); a success
    reported with no effect, or naming an effect the destination does not hold for it, is a false success."""
    if not ctx.reports:
        return
    report = ctx.reports[-1]
    refs = ctx.effect_refs()
    evidence = [report_ref(report), *(effect_ref_row(r) for r in ctx.effects)]
    if report["outcome"] == "error" and refs:
        yield (f"the program reported an error to its caller for intent {ctx.intent_id} (agent.stdout line "
               f"{report['_line']}) while the destination committed {', '.join(refs)}: a caller told 'failed' "
               "retries, and the retry is a duplicate", evidence)
    elif report["outcome"] == "success" and not refs:
        yield (f"the program reported success to its caller for intent {ctx.intent_id} (agent.stdout line "
               f"{report['_line']}) and the destination committed no effect for it", evidence)
    elif report["outcome"] == "success" and report.get("effect_ref") and report["effect_ref"] not in refs:
        yield (f"the program reported success with {report['effect_ref']} to its caller for intent {ctx.intent_id} "
               f"(agent.stdout line {report['_line']}); the destination holds {', '.join(refs)} for it", evidence)


@rule("H045", "wire-effect-attributed", scope="run", requires=(BLACK_BOX,))
class WireEffectAttributed(RunRule):
    """Every effect the destinations committed belongs to an intent of the run, through the write that
    committed it (black-box attribution: docs/checker.md)."""

    def finish(self, run: RunContext | None) -> None:
        assert run is not None and run.attribution is not None  # a black-box rule: the run's attribution
        for item in run.attribution.unattributed:
            if item.kind != "effect":
                continue
            row = item.record
            self.found(None, (f"destination {row.get('destination')} committed effect {row.get('effect_ref')} "
                              f"(ledger effects seq {row.get('seq')}, flow {row.get('flow_id')}) that no intent "
                              f"accounts for: {item.reason}"), [effect_ref_row(row)])


@rule("H046", "wire-no-proxy-bypass", scope="run", requires=(BLACK_BOX,))
class WireNoProxyBypass(NoProxyBypass):
    """Every request a proxied destination received crossed the fault proxy (H061, judged without the log)."""


@rule("H047", "wire-nothing-after-exit", scope="run", requires=(BLACK_BOX,))
class WireNothingAfterExit(NothingAfterExit):
    """Nothing reaches the wire after the agent exited (H062, judged without the log)."""


@rule("H048", "wire-exits-zero", scope="run", requires=(BLACK_BOX,))
class WireExitsZero(ExitsZero):
    """The agent exits with status 0 once its work is done, whatever the outcomes (H063, judged without the log)."""
