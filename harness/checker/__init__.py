"""The checker: judges an ``Evidence`` (agent log + proxy journal + effect ledger) against the rules.

    check(evidence, *, offline=False) -> Verdict

Rules live in ``harness.checker.rules`` and register themselves in ``RULES`` with ``@rule(code, name)``;
see docs/checker.md for the table. Operation rules are judged per operation (``judge_operation``), run
rules are fed the log in line order (``RunRules``); the streaming audit uses both the same way.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from harness.checker import rules as _rules  # noqa: F401  (registers the rules)
from harness.checker.context import OperationContext, RunContext, wire_summary
from harness.checker.model import CLASSIFICATIONS, AttemptVerdict, Finding, OperationVerdict, Verdict
from harness.checker.registry import RULES, Rule, RuleRegistryError, RunRule, applicable, rule
from harness.checker.run_rules import RunRules
from harness.evidence import Evidence

__all__ = [
    "AttemptVerdict",
    "CLASSIFICATIONS",
    "Finding",
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
    "check",
    "judge_operation",
    "rule",
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


def judge_operation(op: OperationContext, extra: list[Finding] | None = None, *, held: bool = True) -> OperationVerdict:
    """Run the operation rules on one operation (used by ``check`` and by the streaming audit)."""
    findings = list(extra or [])
    op_rules, checked = _rules_for(op.offline, op.format, len(RULES))
    op_id = op.operation_id
    for r in op_rules:
        for message, evidence in r.func(op):
            findings.append(Finding(r.code, r.name, op_id, message, evidence))
    if len(findings) > 1:
        findings.sort(key=lambda f: f.code)
    held_labels: list[str] = []
    if held:
        failed = {f.code for f in findings}
        held_labels = [r.label for r in checked if r.code not in failed]
    return OperationVerdict(
        operation_id=op_id, intent_id=op.intent_id, classification=op.classify(), state=op.state,
        intent=op.intent, attempts=_attempt_verdicts(op), effects=op.effect_refs(), findings=findings,
        held=held_labels, observations=[_observation_view(o) for o in op.observations],
        resolution=_resolution_view(op.resolution))


def _observation_view(obs: dict[str, Any]) -> dict[str, Any]:
    return {"observation_id": obs.get("observation_id"), "source": obs.get("source"), "found": obs.get("found"),
            "effect_refs": obs.get("effect_refs"), "lag_possible": obs.get("lag_possible"), "line": obs.get("_line")}


def _resolution_view(resolution: dict[str, Any] | None) -> dict[str, Any] | None:
    if resolution is None:
        return None
    return {"state": resolution.get("state"), "evidence": resolution.get("evidence"),
            "effect_refs": resolution.get("effect_refs"), "reason": resolution.get("reason"),
            "correction_operation_id": resolution.get("correction_operation_id"), "line": resolution.get("_line")}


def check(evidence: Evidence, *, offline: bool = False) -> Verdict:
    """Judge one run. ``Verdict.passed`` is True only when no rule found anything.

    A scenario's evidence always has the wire, even when its journal is empty (the agent sent
    nothing); ``offline=True`` judges the log alone, as the offline audit does: the rules that need
    the wire are skipped and effects are counted from the log.
    """
    run_findings: list[Finding] = []
    run_rules = RunRules(evidence, run_findings.append, offline=offline)
    run = RunContext(evidence, offline=offline, run_rules=run_rules)
    for context in run.ops.values():
        run_rules.operation_done(context)
    run_rules.finish(run)
    rules_run = [r.label for r in RULES.values() if applicable(r, offline=offline)]
    per_op: dict[str, list[Finding]] = {}
    for finding in run_findings:
        if finding.operation_id in run.ops:
            per_op.setdefault(finding.operation_id, []).append(finding)
    operations = [judge_operation(op, per_op.get(op.operation_id)) for op in run.ops.values()]
    findings = [f for f in run_findings if f.operation_id not in run.ops]
    for op in operations:
        findings.extend(op.findings)
    findings.sort(key=lambda f: (f.code, f.operation_id or ""))
    return Verdict(operations=operations, findings=findings, rules_run=rules_run)
