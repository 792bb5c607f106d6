"""Plain-text rendering of a verdict, readable in a pytest failure and a terminal."""

from __future__ import annotations

from typing import Any

from harness.checker.model import Finding, OperationVerdict, Verdict


def _evidence_line(ref: dict[str, Any]) -> str:
    source = ref.get("source", "?")
    if source == "log":
        extra = " ".join(f"{k}={ref[k]}" for k in ("event", "attempt_id", "observation_id", "dispatch_state", "state")
                         if ref.get(k) is not None)
        return f"log line {ref.get('line')}: {extra}".rstrip(": ")
    if source == "journal":
        return (f"journal line {ref.get('line')}: flow {ref.get('flow_id')} {ref.get('method')} {ref.get('path')} "
                f"key={ref.get('idempotency_key')} forwarded={ref.get('forwarded')} "
                f"upstream={ref.get('upstream_status')} client={ref.get('client_outcome')}")
    if source == "ledger":
        return (f"ledger {ref.get('table')} seq {ref.get('seq')}: effect {ref.get('effect_ref')} on "
                f"{ref.get('destination')} (flow {ref.get('flow_id')}, key {ref.get('operation_key')})")
    return ", ".join(f"{k}={v}" for k, v in ref.items())


def _finding_lines(finding: Finding, indent: str) -> list[str]:
    lines = [f"{indent}FAIL {finding.code} {finding.rule}: {finding.message}"]
    lines += [f"{indent}     - {_evidence_line(ref)}" for ref in finding.evidence[:8]]
    if len(finding.evidence) > 8:
        lines.append(f"{indent}     - ... {len(finding.evidence) - 8} more")
    return lines


def _wire_text(wire: dict[str, Any] | None, saw: list[dict[str, Any]]) -> str:
    if wire is None:
        return "wire: no matching request"
    if wire.get("source") == "ledger":  # not proxied (SSH): only the destination's own record
        text = f"not proxied; the destination received it (ledger request {str(wire.get('flow_id')).split(':')[-1]})"
        if saw:
            text += ": " + ", ".join(f"{r.get('outcome')}" + (f" {r.get('effect_ref')}" if r.get("effect_ref") else "")
                                     for r in saw)
        return text
    text = (f"wire: flow {wire.get('flow_id')} forwarded={wire.get('forwarded')} "
            f"upstream={wire.get('upstream_status')} client={wire.get('client_outcome')}")
    if wire.get("fault"):
        text += f" fault={wire.get('fault')}"
    if saw:
        text += "; destination: " + ", ".join(
            f"{r.get('status')} {r.get('outcome')}" + (f" {r.get('effect_ref')}" if r.get("effect_ref") else "") for r in saw)
    return text


def render_operation(op: OperationVerdict, *, offline: bool = False) -> list[str]:
    intent = op.intent or {}
    what = f"{intent.get('kind')} on {intent.get('destination')}" if intent else "intent not logged"
    lines = [f"operation {op.operation_id} (intent {op.intent_id or '-'}: {what})",
             f"  classification: {op.classification}; state: {op.state}; "
             f"effects: {', '.join(op.effects) if op.effects else 'none'}"]
    for a in op.attempts:
        retry = f" retry of {a.retry_of_attempt_id} ({a.retry_reason})" if a.retry_of_attempt_id else ""
        line = f"  attempt {a.attempt_id}: {a.dispatch_state} key={a.key}{retry}"
        if not offline:
            line += f"; {_wire_text(a.wire, a.destination_saw)}"
        lines.append(line)
    if not op.attempts:
        lines.append("  no attempts logged")
    for obs in op.observations:
        found = {True: "found", False: "not found", None: "?"}[obs.get("found")]
        refs = f" {', '.join(obs['effect_refs'])}" if obs.get("effect_refs") else ""
        lag = " (may lag)" if obs.get("lag_possible") else ""
        lines.append(f"  observation {obs.get('observation_id')} ({obs.get('source')}): {found}{refs}{lag}")
    if op.resolution:
        r = op.resolution
        refs = ", ".join(r.get("effect_refs") or []) or "no effect"
        lines.append(f"  resolved {r.get('state')}: {refs}; evidence {', '.join(r.get('evidence') or []) or 'none'}"
                     + (f"; correction {r['correction_operation_id']}" if r.get("correction_operation_id") else ""))
    for finding in op.findings:
        lines += _finding_lines(finding, "  ")
    if op.held and not op.findings:
        lines.append(f"  held: all {len(op.held)} checks")  # the full list is in the verdict's JSON
    elif op.held:
        lines.append(f"  held: {', '.join(op.held)}")
    return lines


def render_text(verdict: Verdict, *, offline: bool = False) -> str:
    """Per operation: intent, attempts with dispatch states and what the wire/destination saw, effects,
    the checks that held and the ones that failed with their evidence; then run-wide findings."""
    lines = [f"verdict: {'PASSED' if verdict.passed else 'FAILED'} "
             f"({len(verdict.operations)} operation(s), {len(verdict.findings)} finding(s))"]
    for op in verdict.operations:
        lines.append("")
        lines += render_operation(op, offline=offline)
    loose = [f for f in verdict.findings if f.operation_id is None or
             f.operation_id not in {o.operation_id for o in verdict.operations}]
    if loose:
        lines += ["", "run-wide findings:"]
        for finding in loose:
            lines += _finding_lines(finding, "  ")
    return "\n".join(lines) + "\n"
