"""The checker: judges an ``Evidence`` (agent log + proxy journal + effect ledger) against the rules.

    check(evidence, *, offline=False, black_box=None) -> Verdict

Rules live in ``harness.checker.rules`` and register themselves in ``RULES`` with ``@rule(code, name)``;
see docs/checker.md for the table. Operation rules are judged per operation (``judge_operation``), run
rules are fed the log in line order (``RunRules``); the streaming audit uses both the same way. In
black-box mode (a program that writes no audit log) the wire and the ledger are attributed to the
intents (``attribute``) and the black-box rules judge each intent (``judge_intent``) instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from harness.checker import black_box_rules as _black_box_rules  # noqa: F401  (registers the black-box rules)
from harness.checker import rules as _rules  # noqa: F401  (registers the rules)
from harness.checker.attribution import Attribution, IntentContext, attribute
from harness.checker.black_box_rules import NOT_JUDGED, NOT_JUDGED_STATES, wire_tags
from harness.checker.claims import unjudged_labels
from harness.checker.context import OperationContext, wire_summary
from harness.checker.correlation import Correlation
from harness.checker.expectations import agent_broken, expectation_findings
from harness.checker.history import replay
from harness.checker.registry import RULES, Rule, RuleRegistryError, RunRule, applicable, rule
from harness.checker.run_context import RunContext
from harness.checker.run_rules import RunRules
from harness.contract import BLACK_BOX_MODE, ContextKey
from harness.evidence import Evidence
from harness.limits import collector_paused
from harness.results.scenario_result import AgentRun
from harness.results.verdict import (
    CLASSIFICATIONS,
    FAILED,
    HELD,
    MODEL_CODE,
    NOT_EXERCISED,
    AttemptVerdict,
    Finding,
    IntentVerdict,
    Judgement,
    OperationVerdict,
    Verdict,
)

__all__ = [
    "AttemptVerdict",
    "Attribution",
    "CLASSIFICATIONS",
    "Correlation",
    "Finding",
    "IntentContext",
    "IntentVerdict",
    "Judgement",
    "OperationContext",
    "OperationVerdict",
    "RULES",
    "Rule",
    "RuleRegistryError",
    "RunContext",
    "RunRule",
    "RunRules",
    "Verdict",
    "applicable",
    "attribute",
    "check",
    "check_black_box",
    "correlation_of",
    "expectation_findings",
    "judge",
    "judge_intent",
    "judge_operation",
    "rule",
    "run_verdict",
    "survivors_of",
]


def _attempt_verdicts(op: OperationContext) -> list[AttemptVerdict]:
    views = []
    for attempt in op.attempts:
        entry = op.wire.get(attempt["attempt_id"])
        saw = op.ledger_requests.get(entry.get("flow_id") or "", []) if entry else []  # no flow_id: no rows
        views.append(AttemptVerdict(
            attempt_id=attempt["attempt_id"], dispatch_state=attempt.get("dispatch_state"),
            key=attempt.get("idempotency_key"), line=attempt.get("_line"),
            retry_of_attempt_id=attempt.get("retry_of_attempt_id"), retry_reason=attempt.get("retry_reason"),
            wire=wire_summary(entry) if entry else None,
            destination_saw=[{k: r.get(k) for k in ("seq", "status", "outcome", "effect_ref")} for r in saw]))
    return views


@cache
def _rules_for(offline: bool, fmt: str, registered: int) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(operation rules to run, all applicable rules) -- cached: the audit calls this per operation."""
    checked = tuple(sorted((r for r in RULES.values() if applicable(r, offline=offline, fmt=fmt)),
                           key=lambda r: r.code))
    return tuple(r for r in checked if r.scope == "operation"), checked


@lru_cache(maxsize=4096)
def _held_and_idle(offline: bool, fmt: str, registered: int, failed: frozenset[str],
                   tags: frozenset[str]) -> tuple[list[str], list[str]]:
    """The labels of the applicable rules that held where ``tags`` exercised them, and of those it did not: one
    pair of lists for every operation of the same findings and history (most of a run's are alike), never changed."""
    checked = _rules_for(offline, fmt, registered)[1]
    return ([r.label for r in checked if r.code not in failed and r.exercised_by(tags)],
            [r.label for r in checked if r.code not in failed and not r.exercised_by(tags)])


def _said_already(findings: list[Finding]) -> list[Finding]:
    """The model's findings (H060) on a log line no named rule's finding cites: the named rules say it better."""
    cited = {e.get("line") for f in findings if f.code != MODEL_CODE for e in f.evidence if e.get("source") == "log"}
    kept = []
    for finding in findings:
        line = finding.evidence[0].get("line") if finding.code == MODEL_CODE and finding.evidence else None
        if line is not None:
            if line in cited:
                continue
            cited.add(line)  # one word of the model's per line: its first
        kept.append(finding)
    return kept


def judge_operation(op: OperationContext, extra: list[Finding] | None = None, *, held: bool = True) -> OperationVerdict:
    """Run the operation rules on one operation (used by ``check`` and by the streaming audit)."""
    findings = list(extra or [])
    op_rules = _rules_for(op.offline, op.format, len(RULES))[0]
    op_id = op.operation_id
    for r in op_rules:
        for message, evidence in r.func(op):
            findings.append(Finding(r.code, r.name, op_id, message, evidence))
    if len(findings) > 1:
        findings = _said_already(findings)
        findings.sort(key=lambda f: f.code)
    held_labels: list[str] = []
    idle: list[str] = []
    transitions: list[str] = []
    if held:
        failed = {f.code for f in findings}
        replayed = replay(op)
        tags = replayed.tags
        transitions = sorted(replayed.transitions)
        held_labels, idle = _held_and_idle(op.offline, op.format, len(RULES), frozenset(failed), frozenset(tags))
    return OperationVerdict(
        operation_id=op_id, intent_id=op.intent_id, classification=op.classify(), state=op.state,
        intent=op.intent, attempts=_attempt_verdicts(op), effects=op.effect_refs(), findings=findings,
        held=held_labels, not_exercised=idle, transitions=transitions,
        observations=[observation_view(o) for o in op.observations],
        resolution=resolution_view(op.resolution))


def observation_view(obs: dict[str, Any]) -> dict[str, Any]:
    return {"observation_id": obs.get("observation_id"), "source": obs.get("source"), "found": obs.get("found"),
            "effect_refs": obs.get("effect_refs"), "lag_possible": obs.get("lag_possible"), "line": obs.get("_line")}


def resolution_view(resolution: dict[str, Any] | None) -> dict[str, Any] | None:
    if resolution is None:
        return None
    return {"state": resolution.get("state"), "evidence": resolution.get("evidence"),
            "effect_refs": resolution.get("effect_refs"), "reason": resolution.get("reason"),
            "correction_operation_id": resolution.get("correction_operation_id"), "line": resolution.get("_line")}


def judge_intent(ctx: IntentContext, extra: list[Finding] | None = None) -> IntentVerdict:
    """Run the black-box operation rules on one intent, as the wire and the ledger show it."""
    findings = list(extra or [])
    op_rules, checked = _black_box_rules_for(len(RULES))
    for r in op_rules:
        for message, evidence in r.func(ctx):
            findings.append(Finding(r.code, r.name, None, message, evidence, intent_id=ctx.intent_id))
    findings.sort(key=lambda f: f.code)
    failed = {f.code for f in findings}
    tags = wire_tags(ctx)
    return IntentVerdict(
        intent_id=ctx.intent_id, intent={k: ctx.intent.get(k) for k in ("kind", "destination", "params")},
        classification=ctx.classify(), effects=ctx.effect_refs(), attempts=[a.to_dict() for a in ctx.attempts],
        key_behaviour=ctx.key_behaviour(), retry_gaps=ctx.retry_gaps(), findings=findings,
        held=[r.label for r in checked if r.code not in failed and r.exercised_by(tags)],
        not_exercised=[r.label for r in checked if r.code not in failed and not r.exercised_by(tags)])


@cache
def _black_box_rules_for(registered: int) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    checked = tuple(sorted((r for r in RULES.values() if applicable(r, offline=False, black_box=True)),
                           key=lambda r: r.code))
    return tuple(r for r in checked if r.scope == "operation"), checked


def check_black_box(evidence: Evidence) -> Verdict:
    """Judge one run without its audit log: each intent from the writes and effects attributed to it."""
    attribution = attribute(evidence)
    run_findings: list[Finding] = []
    run_rules = RunRules(evidence, run_findings.append, offline=False, black_box=True)
    run_rules.finish(RunContext(evidence, attribution=attribution))
    per_intent: dict[str | None, list[Finding]] = {}
    for finding in run_findings:
        per_intent.setdefault(finding.intent_id, []).append(finding)
    intents = [judge_intent(ctx, per_intent.get(ctx.intent_id)) for ctx in attribution.intents.values()]
    findings = [f for f in run_findings if f.intent_id not in attribution.intents]
    for intent in intents:
        findings.extend(intent.findings)
    findings.sort(key=lambda f: (f.code, f.intent_id or ""))
    not_judged = list(NOT_JUDGED)
    if (evidence.expect or {}).get("states"):
        not_judged.append(NOT_JUDGED_STATES)
    return Verdict(findings=findings, mode=BLACK_BOX_MODE, intents=intents, not_judged=not_judged,
                   rules_run=[r.label for r in _black_box_rules_for(len(RULES))[1]],
                   unattributed=[u.to_dict() for u in attribution.unattributed],
                   checks=_run_checks(intents, findings, offline=False, black_box=True))


@collector_paused()
def check(evidence: Evidence, *, offline: bool = False, black_box: bool | None = None) -> Verdict:
    """Judge one run. ``Verdict.passed`` is True only when no rule found anything.

    A scenario's evidence always has the wire, even when its journal is empty (the agent sent
    nothing); ``offline=True`` judges the log alone, as the offline audit does: the rules that need
    the wire are skipped and effects are counted from the log. ``black_box=True`` judges the wire and
    the ledger alone, without the log (``check_black_box``); None: as the run was judged
    (``evidence.mode``, the scenario's ``agent_log: none`` or ``--black-box``).
    """
    if offline and black_box:
        raise ValueError("check(offline=True, black_box=True): the offline audit judges a log, black-box mode the "
                         "wire without one; choose one")
    if not offline and (black_box or (black_box is None and evidence.mode == BLACK_BOX_MODE)):
        return check_black_box(evidence)
    run_findings: list[Finding] = []
    run_rules = RunRules(evidence, run_findings.append, offline=offline)
    run = RunContext(evidence, offline=offline, feed=run_rules.feed_evidence)
    for context in run.ops.values():
        run_rules.operation_done(context)
    run_rules.finish(run)
    rules_run = [r.label for r in RULES.values() if applicable(r, offline=offline)]
    per_op: dict[str, list[Finding]] = {}
    for finding in run_findings:
        if finding.operation_id in run.ops:
            per_op.setdefault(finding.operation_id, []).append(finding)
    operations = []
    for op in run.ops.values():
        operations.append(judge_operation(op, per_op.get(op.operation_id)))
        op.forget_derived()  # else every operation's replay and fingerprints stay until the run's verdict is made
    return run_verdict(operations, [f for f in run_findings if f.operation_id not in run.ops], offline=offline,
                       rules_run=rules_run)


def run_verdict(operations: list[OperationVerdict], run_wide: list[Finding], *, offline: bool,
                rules_run: list[str] | None = None) -> Verdict:
    """The run's verdict from its operations' verdicts (``judge_operation``) and the findings about no operation
    of them: what ``check`` returns, and what the streaming audit gathers when asked to keep its verdict."""
    findings = list(run_wide)
    for op in operations:
        findings.extend(op.findings)
    findings.sort(key=lambda f: (f.code, f.operation_id or ""))
    if rules_run is None:
        rules_run = [r.label for r in RULES.values() if applicable(r, offline=offline)]
    return Verdict(operations=operations, findings=findings, rules_run=rules_run,
                   checks=_run_checks(operations, findings, offline),
                   transitions=sorted({t for op in operations for t in op.transitions}))


def correlation_of(evidence: Evidence) -> Correlation:
    """The log of ``evidence`` tied to its wire and ledger as ``check`` ties them (``correlate``): each attempt's
    flow, each observation's read, each operation's ledger rows. What the HTML report and ``reproduce`` read."""
    return RunContext(evidence).correlation


def judge(evidence: Evidence, *, expect: Mapping[str, Any] | None = None, runs: Sequence[AgentRun] | None = None,
          effects: list[dict[str, Any]] | None = None, offline: bool = False, black_box: bool | None = None,
          facts: bool = True) -> Judgement:
    """Judge one run's evidence, the one way every front end and the engine do: nothing when the evidence is
    incomplete; else the rules (``check``, with ``offline`` and ``black_box``), the scenario's expectations
    (X001, ``expectation_findings``: ``expect``, the agent's ``runs`` and the ledger's ``effects``, by default
    what the evidence folder holds; none when it holds no ``expect``) added to the verdict, and, with ``facts``,
    what the wire and the ledger show whatever the mode (``Attribution.facts``)."""
    if runs is None:
        runs = [AgentRun(**run) for run in evidence.agent.get(ContextKey.RUNS) or []]
    gaps = list(evidence.incomplete) + survivors_of(runs)
    if gaps:  # the harness lost evidence, or cannot vouch for it: say so, judge nothing
        return Judgement(Verdict(mode=evidence.mode), incomplete=gaps)
    broken = agent_broken(evidence, runs) if not offline else None
    if broken is not None:  # nothing to judge but that: the rules would only restate it as missing work
        verdict = Verdict(mode=evidence.mode)
        verdict.add_findings([broken])
        return Judgement(verdict, [broken.message], attribute(evidence).facts(evidence) if facts else {})
    verdict = check(evidence, offline=offline, black_box=black_box)
    known = attribute(evidence).facts(evidence) if facts else {}
    expect = evidence.expect if expect is None else expect
    effects = evidence.effects if effects is None else effects
    unmet = expectation_findings(expect, verdict, runs, effects) if expect else []
    verdict.add_findings(unmet)  # the scenario's expectations are part of the verdict (X001)
    verdict.not_applicable = {str(k): str(v) for k, v in (evidence.not_applicable or {}).items()}
    return Judgement(verdict, [f.message for f in unmet], known)


def survivors_of(runs: Sequence[AgentRun]) -> list[str]:
    """What outlived a run of the agent (``AgentRun.survivors``: found after its group was killed, unsandboxed),
    as evidence gaps: such a process could act on the destinations or the evidence after the harness stopped
    watching, so the run is not the one the scenario set up and is not judged (INCOMPLETE), whatever it did."""
    return [f"agent run {index}: a process of the agent outlived it ({survivor}; killed by the harness): what it "
            "did after the run ended is not watched, so the run is not judged (a setsid or double-forked worker; "
            "the sandbox, harness.sandbox, kills them all with the run)"
            for index, run in enumerate(runs, 1) for survivor in run.survivors]


def _run_checks(judged: list[OperationVerdict] | list[IntentVerdict], findings: list[Finding], offline: bool,
                black_box: bool = False) -> dict[str, str]:
    """Each applicable rule's word on the run: failed where it found something, held where some operation's
    history (an intent's writes, black-box) exercised it (or it needs nothing to be exercised), else not
    exercised; and the rules of the claims table this mode cannot apply (no wire offline, no log in black-box
    mode): not exercised, never held (``harness.checker.claims``)."""
    failed = {f.code for f in findings}
    held = {label for one in judged for label in one.held}
    checks: dict[str, str] = {}
    for r in RULES.values():
        if not applicable(r, offline=offline, black_box=black_box):
            continue
        checks[r.label] = (FAILED if r.code in failed else
                           HELD if r.label in held or (not r.exercised and r.scope == "run") else NOT_EXERCISED)
    for label in unjudged_labels(offline=offline, black_box=black_box):
        checks.setdefault(label, NOT_EXERCISED)
    return checks
