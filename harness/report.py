"""Every text the harness shows a person, rendered from data: verdicts, scenario results, the
matrix, the catalogue. The engine, the checker and the matrix return data; the front ends (pytest
plugin, CLI) call these.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

from harness.colour import PLAIN, Paint
from harness.limits import BLOCKS_SHOWN, FINDINGS_SHOWN
from harness.results.verdict import (
    EFFECTS_SAID,
    EXPECTATION_CODE,
    EXPECTATION_RULE,
    FAILED,
    Finding,
    IntentVerdict,
    OperationVerdict,
    Verdict,
)
from harness.visible import printable

P = ParamSpec("P")

if TYPE_CHECKING:
    from harness.results.audit import AuditSummary
    from harness.results.exploration import Exploration
    from harness.results.matrix import Matrix
    from harness.results.scenario_result import ScenarioResult
    from harness.scenario import Scenario


def _shown_text(render: Callable[P, str]) -> Callable[P, str]:
    """A text renderer's output through ``printable``: the one gate between evidence and a terminal."""
    @functools.wraps(render)
    def rendered(*args: P.args, **kwargs: P.kwargs) -> str:
        return printable(render(*args, **kwargs))

    return rendered


def _evidence_line(ref: dict[str, Any]) -> str:
    return printable(_evidence_text(ref), lines=False)


def _evidence_text(ref: dict[str, Any]) -> str:
    source = ref.get("source", "?")
    if source == "log":
        extra = " ".join(f"{k}={ref[k]}" for k in ("event", "attempt_id", "observation_id", "dispatch_state", "state")
                         if ref.get(k) is not None)
        return f"log line {ref.get('line')}: {extra}".rstrip(": ")
    if source == "journal":
        return (f"journal line {ref.get('line')}: flow {ref.get('flow_id')} {ref.get('method')} {ref.get('path')} "
                f"key={ref.get('idempotency_key')} forwarded={ref.get('forwarded')} "
                f"upstream={ref.get('upstream_status')} client={ref.get('client_outcome')}")
    if source == "ledger" and ref.get("table") == "requests":  # a request the proxy does not front (SSH)
        return (f"ledger requests seq {ref.get('seq')}: {ref.get('method')} {ref.get('path')} "
                f"key={ref.get('idempotency_key')}")
    if source == "ledger" and ref.get("rows") == 0:  # an expectation of effects where the ledger holds none
        return f"ledger {ref.get('table')}: none on {ref.get('destination')}"
    if source == "file" and ref.get("line") is not None:  # a report line: what the program told its caller
        told = f"{ref.get('outcome')}" + (f" {ref['effect_ref']}" if ref.get("effect_ref") else "")
        return f"{ref.get('path')} line {ref.get('line')}: reported {told}"
    if source == "file" and ref.get("tail"):  # the end of what the agent wrote on stderr
        return f"{ref.get('path')} ends: " + " | ".join(ref["tail"])
    if source == "ledger":
        return (f"ledger {ref.get('table')} seq {ref.get('seq')}: effect {ref.get('effect_ref')} on "
                f"{ref.get('destination')} (flow {ref.get('flow_id')}, key {ref.get('operation_key')})")
    return ", ".join(f"{k}={v}" for k, v in ref.items())


def _finding_lines(finding: Finding, indent: str) -> list[str]:
    lines = [f"{indent}FAIL {finding.code} {finding.rule}: {printable(finding.message, lines=False)}"]
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
            f"{r.get('status')} {r.get('outcome')}" + (f" {r.get('effect_ref')}" if r.get("effect_ref") else "")
            for r in saw)
    return text


def effects_said(classification: str) -> str:
    """What a classification counts, in words (``EFFECTS_SAID``), said after the operation's own verdict word so that
    "healthy" never reads as a pass; the JSON keeps the classification's own values (the brief's contract)."""
    return EFFECTS_SAID.get(classification, classification)


def verdict_word(findings: Sequence[Finding]) -> str:
    """One operation's (or intent's) own verdict: PASS, or FAIL and how many findings."""
    return f"FAIL ({_count(len(findings), 'finding')})" if findings else "PASS"


def render_operation(op: OperationVerdict, *, offline: bool = False) -> list[str]:
    intent = op.intent or {}
    what = f"{intent.get('kind')} on {intent.get('destination')}" if intent else "intent not logged"
    lines = [f"operation {op.operation_id} (intent {op.intent_id or '-'}: {what})",
             f"  verdict: {verdict_word(op.findings)}; state: {op.state}; "
             f"effects: {', '.join(op.effects) if op.effects else 'none'} ({effects_said(op.classification)})"]
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
    idle = f"; not exercised: {len(op.not_exercised)}" if op.not_exercised else ""
    if op.held and not op.findings:  # the full lists are in the verdict's JSON
        lines.append(f"  held: all {len(op.held)} checks its history exercised{idle}")
    elif op.held:
        lines.append(f"  held: {', '.join(op.held)}{idle}")
    return [printable(line, lines=False) for line in lines]  # each one line, whatever its ids hold


def _wire_attempt_text(index: int, attempt: dict[str, Any]) -> str:
    """One write of a black-box intent: what it carried, what the client and the destination saw."""
    key = attempt.get("idempotency_key") or "-"
    if attempt.get("source") == "ledger":
        client = "not proxied"
    elif attempt.get("client_outcome") == "response":
        client = f"client got {attempt.get('client_status')}"
        if attempt.get("client_retry_after") is not None:
            client += f" (Retry-After {attempt['client_retry_after']})"
    else:
        client = f"client got no answer ({attempt.get('client_outcome')})"
    saw = attempt.get("destination_saw") or []
    destination = ", ".join(f"{r.get('status')} {r.get('outcome')}" + (f" {r['effect_ref']}" if r.get("effect_ref")
                                                                        else "") for r in saw) or "never reached it"
    fault = f" fault={attempt['fault']}" if attempt.get("fault") else ""
    return (f"  attempt {index}: {attempt.get('method')} {attempt.get('path')} flow {attempt.get('flow_id')} "
            f"key={key}; {client}{fault}; destination: {destination} (attributed by {attempt.get('attributed_by')})")


def render_intent(intent: IntentVerdict) -> list[str]:
    """A black-box intent: its writes on the wire, its effects, the key behaviour and retry spacing, and
    the black-box checks that held or failed."""
    what = intent.intent or {}
    gaps = ", ".join(f"{g:.2f} s" for g in intent.retry_gaps) or "-"
    lines = [f"intent {intent.intent_id} ({what.get('kind')} on {what.get('destination')})",
             f"  verdict: {verdict_word(intent.findings)}; effects: {', '.join(intent.effects) or 'none'} "
             f"({effects_said(intent.classification)})",
             f"  attempts on the wire: {len(intent.attempts)}; key: {intent.key_behaviour}; retry spacing: {gaps}"]
    lines += [_wire_attempt_text(i, a) for i, a in enumerate(intent.attempts, start=1)]
    if not intent.attempts:
        lines.append("  no write on the wire")
    for finding in intent.findings:
        lines += _finding_lines(finding, "  ")
    idle = f"; not exercised: {len(intent.not_exercised)}" if intent.not_exercised else ""
    if intent.held and not intent.findings:
        lines.append(f"  held: all {len(intent.held)} black-box checks its writes exercised{idle}")
    elif intent.held:
        lines.append(f"  held: {', '.join(intent.held)}{idle}")
    return [printable(line, lines=False) for line in lines]  # each one line, whatever its ids hold


def _unattributed_text(item: dict[str, Any]) -> str:
    if item.get("kind") == "effect":
        what = f"effect {item.get('effect_ref')} on {item.get('destination')} (flow {item.get('flow_id')})"
    else:
        what = (f"write {item.get('method')} {item.get('path')} to {item.get('destination')} "
                f"(flow {item.get('flow_id')})")
    return f"{what}: {item.get('reason')}"


def render_not_judged(verdict: Verdict) -> list[str]:
    """What black-box mode cannot answer, said plainly: the questions left for an audit log."""
    return ["not judged in black-box mode (the program wrote no audit log; the wire and the ledger cannot say):",
            *[f"  - {question}" for question in verdict.not_judged]]


def summarised(verdict: Verdict, shown: int | None = None) -> bool:
    """Whether the report of ``verdict`` summarises (``render_text``): more findings than ``shown``, or more
    operations or intents than ``BLOCKS_SHOWN``; never with ``shown`` 0 (all)."""
    limit = FINDINGS_SHOWN if shown is None else shown
    return limit > 0 and (len(verdict.findings) > limit
                          or len(verdict.operations) + len(verdict.intents) > max(BLOCKS_SHOWN, limit))


def render_rule_counts(findings: list[Finding], what: str = "operation(s)") -> list[str]:
    """The findings counted per rule, in code order: ``H016 single-effect  800 finding(s) on 800 operation(s)``
    (``what``: what a finding's subject is; a finding of none is run-wide)."""
    counts: dict[str, tuple[str, list[Finding]]] = {}
    for finding in findings:
        counts.setdefault(finding.code, (finding.rule, []))[1].append(finding)
    width = max((len(f"{code} {rule}") for code, (rule, _) in counts.items()), default=0)
    lines = []
    for code in sorted(counts):
        rule, found = counts[code]
        subjects = {f.subject for f in found if f.subject is not None}
        run_wide = sum(f.subject is None for f in found)
        where = [f"on {len(subjects):,} {what}"] if subjects else []
        where += [f"{run_wide:,} run-wide"] if run_wide and subjects else ["run-wide"] if run_wide else []
        lines.append(f"  {f'{code} {rule}':<{width}}  {len(found):>7,} finding(s) {', '.join(where)}")
    return lines


def _finding_key(finding: Finding) -> tuple[Any, ...]:
    """A finding by what it says, not by which object holds it (a verdict read back from JSON holds each
    finding twice: in its operation and in the run's list)."""
    return finding.code, finding.operation_id, finding.intent_id, finding.message


def _chosen(findings: list[Finding], limit: int) -> set[tuple[Any, ...]]:
    """The findings a summarised report shows in full (``_finding_key``): the first of each rule, then the
    first ones in the verdict's order, up to ``limit`` in all (more only when there are more rules than that)."""
    chosen: dict[tuple[Any, ...], None] = {}
    seen: set[str] = set()
    for finding in findings:
        if finding.code not in seen:
            seen.add(finding.code)
            chosen[_finding_key(finding)] = None
    for finding in findings:
        if len(chosen) >= limit:
            break
        chosen.setdefault(_finding_key(finding), None)
    return set(chosen)


@_shown_text
def render_text(verdict: Verdict, *, offline: bool = False, shown: int | None = None) -> str:
    """Per operation: intent, attempts with dispatch states and what the wire/destination saw, effects,
    the checks that held and the ones that failed with their evidence; then run-wide findings. A black-box
    verdict: per intent its writes on the wire and its effects, then what that mode cannot judge.

    A large verdict (``summarised``: more than ``shown`` findings, default ``FINDINGS_SHOWN``, or more than
    ``BLOCKS_SHOWN`` operations) is summarised: the findings counted per rule, then only the operations of the
    findings shown in full (the first of each rule, then the first ones, up to ``shown``), and what was left
    out; verdict.json holds every one. ``shown=0``: everything, however large."""
    unmet = sum(f.code == EXPECTATION_CODE for f in verdict.findings)
    of_which = f", {unmet} of them the scenario's own expectations ({EXPECTATION_CODE})" if unmet else ""
    outcome = "PASSED" if verdict.passed else "FAILED"
    limit = FINDINGS_SHOWN if shown is None else shown
    summary = summarised(verdict, shown)
    chosen = _chosen(verdict.findings, limit) if summary else set()
    if verdict.black_box:
        lines = [f"verdict: {outcome} (black-box: judged from the proxy journal and the effect ledger alone; "
                 f"{len(verdict.intents)} intent(s), {len(verdict.findings)} finding(s){of_which})"]
    else:
        lines = [f"verdict: {outcome} "
                 f"({len(verdict.operations)} operation(s), {len(verdict.findings)} finding(s){of_which})"]
    if verdict.checks:
        lines.append(render_checks_line(verdict))
    if verdict.not_applicable:
        from harness.coverage import not_applicable_lines

        lines += not_applicable_lines(verdict.not_applicable)
    what = "intent(s)" if verdict.black_box else "operation(s)"
    if summary:
        lines += ["", f"findings per rule (shown in full: the first of each rule, then the first ones up to {limit}; "
                      "verdict.json has every one; --findings-shown N shows more, 0 all):"]
        lines += render_rule_counts(verdict.findings, what) or ["  none"]
    blocks: list[OperationVerdict | IntentVerdict] = [*verdict.intents] if verdict.black_box else []
    blocks += verdict.operations
    left_out = [b for b in blocks if summary and not any(_finding_key(f) in chosen for f in b.findings)]
    skipped = {id(b) for b in left_out}
    for block in blocks:
        if id(block) in skipped:
            continue
        lines.append("")
        lines += render_intent(block) if isinstance(block, IntentVerdict) else render_operation(block, offline=offline)
    shown_ids = {o.operation_id for o in verdict.operations}
    judged = {i.intent_id for i in verdict.intents}
    loose = [f for f in verdict.findings if (f.operation_id is None or f.operation_id not in shown_ids)
             and (f.intent_id is None or f.intent_id not in judged)]
    loose_left = [f for f in loose if summary and _finding_key(f) not in chosen]
    if loose_left:
        loose = [f for f in loose if _finding_key(f) in chosen]
    if loose:
        lines += ["", "run-wide findings:"]
        for finding in loose:
            lines += _finding_lines(finding, "  ")
    if summary:
        left = sum(len(b.findings) for b in left_out) + len(loose_left)
        clean = sum(not b.findings for b in left_out)
        lines += ["", f"not shown: {left:,} finding(s), {len(left_out):,} {what} ({clean:,} of them held every "
                      "check); verdict.json has them all (python -m harness check FOLDER --format json)"]
    if verdict.unattributed:
        unattributed = verdict.unattributed[:limit] if summary else verdict.unattributed
        lines += ["", "on the wire and in the ledger, no intent's (black-box attribution, docs/checker.md):"]
        lines += [f"  {_unattributed_text(u)}" for u in unattributed]
        if len(unattributed) < len(verdict.unattributed):
            more = len(verdict.unattributed) - len(unattributed)
            lines.append(f"  ... and {more:,} more (verdict.json: unattributed)")
    if verdict.black_box:
        lines += ["", *render_not_judged(verdict)]
    return "\n".join(lines) + "\n"


@_shown_text
def render_checks_line(verdict: Verdict) -> str:
    """Each check's word on the run, counted: 'PASS: 9 checks exercised and held; 27 not exercised by this
    scenario (retry path: see request_lost, ...)'; a failed run counts its failed checks first."""
    from harness.coverage import checks_summary

    failed = verdict.checks_said(FAILED)
    head = f"FAIL: {len(failed)} checks failed; " if failed else "PASS: "
    return head + checks_summary(verdict)


def _agent_run_text(run: Any) -> str:
    how = ("timed out" if run.timed_out else "killed by the harness (planned crash)"
           if run.killed_by_harness else f"exit status {run.exit_status}")
    return f"  agent run: {how} after {run.seconds:.2f} s"


@_shown_text
def render_headline(result: ScenarioResult) -> str:
    outcome = "INCOMPLETE" if result.incomplete else "PASS" if result.passed else "FAIL"
    mode = " (black-box)" if result.verdict.black_box else ""
    return f"scenario {result.scenario} with agent {result.agent!r}{mode}: {outcome}"


@_shown_text
def render_incomplete(gaps: list[str]) -> str:
    """Evidence the harness lost: no verdict is given, the agent is neither passed nor blamed."""
    lines = ["INCOMPLETE: the harness lost evidence, so the agent was not judged:"]
    lines += [f"  - {printable(gap, lines=False)}" for gap in gaps]
    return "\n".join(lines) + "\n"


@_shown_text
def render_untrusted(name: str, why: str) -> str:
    """A verdict file not shown: ``harness report`` judges the evidence again instead."""
    return f"{name}: not shown, untrusted ({why}); the evidence judged again:"


@_shown_text
def render_check(verdict: Verdict, expectation_failures: list[str], *, shown: int | None = None) -> str:
    """``python -m harness check``: the verdict, the scenario's own expectations among its findings (X001,
    under their operation or run-wide), then a line counting them."""
    said = {f.message for f in verdict.by_code(EXPECTATION_CODE)}
    lines = [render_text(verdict, shown=shown)] + [f"FAIL {EXPECTATION_CODE} {EXPECTATION_RULE}: {failure}"
                                      for failure in expectation_failures if failure not in said]
    if expectation_failures:
        lines.append(f"expectations: FAILED ({len(expectation_failures)} of the scenario's own failed)")
    return "\n".join(lines)


@_shown_text
def render_evidence_line(result: ScenarioResult) -> str:
    return (f"evidence: {result.evidence_dir}" if result.evidence_kept
            else "evidence: not kept (the run passed; --keep-evidence all keeps it)")


@_shown_text
def render_result(result: ScenarioResult, *, shown: int | None = None) -> str:
    """One scenario run: the headline, how each agent run ended, the verdict (summarised past ``shown``
    findings: ``render_text``), the scenario's own expectations that failed, and where the evidence is."""
    lines = [render_headline(result)]
    lines += [_agent_run_text(run) for run in result.agent_runs]
    if result.sandbox:  # what the verdict can vouch for: "unsandboxed: why; what that gives up" said as plainly
        lines.append(f"  {'' if result.sandbox.startswith('unsandboxed') else 'sandbox: '}{result.sandbox}")
    if result.incomplete:
        lines.append(render_incomplete(result.incomplete))
    else:
        lines.append(render_text(result.verdict, shown=shown))  # X001: the expectations are findings
    page = html_report_path(result)
    if page is not None:
        lines.append(f"report: {page}")
    lines.append(render_evidence_line(result))
    return "\n".join(lines)


def html_report_path(result: ScenarioResult) -> Path | None:
    """The investigation page a failing run wrote into its evidence folder (``harness.html_report``), if there."""
    from harness.html_report import REPORT_HTML

    path = Path(result.evidence_dir) / REPORT_HTML
    return path if result.evidence_kept and not result.passed and path.is_file() else None


@_shown_text
def render_failure_pointer(result: ScenarioResult) -> str:
    """A failed run in the session summary: its whole verdict is already in the failure report."""
    page = html_report_path(result)
    report = f" report: {page}" if page is not None else ""
    return f"{render_headline(result)} (verdict above) {render_evidence_line(result)}{report}"


@_shown_text
def render_failure_line(result: ScenarioResult, *, shown: int | None = None) -> str:
    """A failed run in one line (pytest's short summary, JUnit's ``message``): the rule codes per
    operation, the scenario's own expectations that failed, or why the evidence is incomplete. Past ``shown``
    operations (``FINDINGS_SHOWN``; 0: all), the first ones, then the findings of all counted per rule."""
    if result.incomplete:
        return f"INCOMPLETE: the harness lost evidence: {result.incomplete[0].splitlines()[0]}"
    by_operation: dict[str | None, dict[str, None]] = {}
    per_rule: dict[str, int] = {}
    for finding in result.verdict.findings:
        if finding.code != EXPECTATION_CODE:  # the expectations' X001 findings are counted once, below
            by_operation.setdefault(finding.subject, {})[finding.code] = None
            per_rule[finding.code] = per_rule.get(finding.code, 0) + 1
    parts = [" ".join(codes) + (f" on {op}" if op else " run-wide") for op, codes in by_operation.items()]
    limit = FINDINGS_SHOWN if shown is None else shown
    if 0 < limit < len(parts):
        counted = ", ".join(f"{code} {per_rule[code]:,}" for code in sorted(per_rule))
        parts = [*parts[:limit], f"and {len(parts) - limit:,} more (findings per rule: {counted})"]
    if result.expectation_failures:
        parts.append(f"{EXPECTATION_CODE} ({len(result.expectation_failures)} of the scenario's expectations)")
    return "; ".join(parts) or render_headline(result)


@_shown_text
def render_pass_line(result: ScenarioResult) -> str:
    """A passed run in one line: the headline, how much was checked, and where the evidence is."""
    verdict = result.verdict
    held, idle = len(verdict.checks_said("held")), len(verdict.checks_said("not exercised"))
    checks = f"{held} check(s) exercised and held, {idle} not exercised"
    if verdict.black_box:
        judged = f"black-box: {len(verdict.intents)} intent(s), {checks}"
    else:
        judged = f"{len(verdict.operations)} operation(s), {checks}"
    return f"{render_headline(result)} ({judged}) {render_evidence_line(result)}"


_MATRIX_SYMBOLS = {"ok": ".", "fail": "x", "caught": "X", "missed": "!", "false-alarm": "F"}
# the certification table's columns: (header, the cell's value), in the text, Markdown and JSON alike
CELL_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("agent", lambda c: c.agent), ("scenario", lambda c: c.scenario), ("verdict", lambda c: c.outcome),
    ("effects", lambda c: c.fact("effects")), ("attempts", lambda c: c.fact("attempts")),
    ("key behaviour", lambda c: c.fact("key_behaviour")),
)


def _cell_rows(matrix: Matrix) -> tuple[list[str], list[list[str]]]:
    """The certification table: one row per cell, agent by agent (each agent's scenarios together, in the
    matrix's order); a mode column when the cells were judged both ways."""
    columns = list(CELL_COLUMNS)
    if len({c.mode for c in matrix.cells}) > 1:
        columns.insert(3, ("mode", lambda c: c.mode.replace("_", "-")))
    agents = list(dict.fromkeys(c.agent for c in matrix.cells))
    cells = sorted(matrix.cells, key=lambda c: agents.index(c.agent))  # stable: scenarios keep their order
    return [h for h, _ in columns], [[str(value(c)) for _, value in columns] for c in cells]


def _modes_said(matrix: Matrix) -> str:
    modes = {c.mode for c in matrix.cells}
    if modes == {"black_box"}:
        return "judged in black-box mode: from the proxy journal and the effect ledger alone"
    if modes == {"events"}:
        return "judged from each agent's audit log beside the proxy journal and the effect ledger"
    return "judged with the agent's audit log (events) or without it (black-box), as the mode column says"


# What a Markdown table cell must escape: the cell separator, the escape character itself, and what would
# start inline markup (code, emphasis, links, HTML, entities, strikethrough). An underscore between two
# letters or digits starts nothing (CommonMark's intraword rule), so new_key_per_attempt stays readable.
_MARKDOWN_SPECIAL = frozenset("\\|`*[]<>&~!")


def markdown_cell(text: str) -> str:
    """``text`` as one GitHub-flavoured Markdown table cell that renders as exactly ``text``: special
    characters backslash-escaped, line breaks and tabs as spaces (a cell is one line)."""
    text = " ".join(text.split()) if any(ch in text for ch in "\r\n\t\f\v") else text.strip()
    out = []
    for index, ch in enumerate(text):
        if ch in _MARKDOWN_SPECIAL:
            out.append("\\" + ch)
        elif ch == "_":
            before = text[index - 1] if index else ""
            after = text[index + 1] if index + 1 < len(text) else ""
            out.append("_" if before.isalnum() and after.isalnum() and before.isascii() and after.isascii()
                       else "\\_")
        else:
            out.append(ch)
    return "".join(out)


def _markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(markdown_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(markdown_cell(v) for v in row) + " |" for row in rows]
    return lines


def _rates(matrix: Matrix) -> list[str]:
    """The catch rate and false alarms, where they apply (a matrix of a team's agents alone has neither),
    then the team's own cells passed."""
    cells = matrix.cells
    caught, wrong = matrix.catch_rate()
    alarms, ref = matrix.false_alarms()
    lines = []
    if wrong or ref or all(c.bundled for c in cells):
        lines += [f"catch rate: {caught}/{wrong} wrong agents caught" + (f" ({100 * caught / wrong:.0f}%)" if wrong
                                                                          else ""),
                  f"false alarms: {alarms}/{ref} reference runs failed" + (f" ({100 * alarms / ref:.0f}%)" if ref
                                                                            else "")]
    if any(not c.bundled for c in cells):
        own = [c for c in cells if not c.bundled]
        lines.append(f"your agents: {sum(c.passed for c in own)}/{len(own)} cells passed")
    return lines


@_shown_text
def render_matrix_markdown(matrix: Matrix) -> str:
    """The certification table as a Markdown file a team can publish: the rates where they apply, one row per
    agent x scenario (verdict, effects committed, attempts on the wire, key behaviour), then each agent's
    command."""
    headers, rows = _cell_rows(matrix)
    agents = {c.agent: c.command for c in matrix.cells}
    lines = ["<!-- written by `python -m harness matrix --markdown`; regenerate it, do not edit it -->", "",
             f"Certification matrix, {_modes_said(matrix)}. A verdict is PASS, or FAIL with the rule codes found "
             "(docs/checker.md); effects are the distinct effects the destinations committed, attempts the writes "
             "on the wire.", ""]
    rates = _rates(matrix)
    if rates:
        said = "; ".join(rates)
        lines += [markdown_cell(said[0].upper() + said[1:] + "."), ""]
    lines += _markdown_table(headers, rows)
    lines += ["", *_markdown_table(["agent", "command"], [[label, command] for label, command in agents.items()])]
    return "\n".join(lines) + "\n"


def matrix_html_data(matrix: Matrix) -> dict[str, Any]:
    """What the HTML page shows, from the matrix's data: the agents (rows), the scenarios (columns), each
    cell with its verdict, outcome, codes and facts, the rates, and each agent's command."""
    from harness.results.matrix import as_dict

    data = as_dict(matrix)
    scenarios = list(dict.fromkeys(c.scenario for c in matrix.cells))
    agents = data["agents"]
    by = {(c.agent, c.scenario): c for c in matrix.cells}
    rows = []
    for agent in agents:
        row = []
        for scenario in scenarios:
            cell = by.get((agent["label"], scenario))
            row.append(None if cell is None else {
                "verdict": "error" if cell.error else cell.verdict, "outcome": cell.outcome,
                "word": "ERROR" if cell.error else "PASS" if cell.passed else "FAIL", "codes": cell.codes,
                "expected_codes": cell.expected_codes, "error": cell.error, "mode": cell.mode.replace("_", "-"),
                "effects": cell.fact("effects"), "attempts": cell.fact("attempts"),
                "key_behaviour": cell.fact("key_behaviour"), "evidence": cell.evidence})
        rows.append({**agent, "cells": row})
    return {"scenarios": scenarios, "rows": rows, "rates": _rates(matrix), "passed": data["passed"],
            "modes": _modes_said(matrix), "catch_rate": data["catch_rate"], "false_alarms": data["false_alarms"]}


@_shown_text
def render_matrix_html(matrix: Matrix) -> str:
    """The certification matrix as one self-contained HTML page (inline CSS, no script, nothing fetched):
    agents x scenarios, each cell its verdict with the rule codes, effects, attempts and key behaviour; the
    catch rate and false alarms where they apply. Jinja2 escapes every value (autoescape)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("harness", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    return env.get_template("matrix.html.j2").render(**matrix_html_data(matrix))


_OUTCOME_WORDS = re.compile(r"^(PASS|FAIL|ERROR)|\((caught|missed|false-alarm)\)$")
_OUTCOME_ROLES = {"PASS": "pass", "FAIL": "fail", "ERROR": "alarm", "caught": "pass", "missed": "alarm",
                  "false-alarm": "alarm"}


def _paint_outcome(text: str, paint: Paint) -> str:
    """A cell's outcome (``FAIL H021 (caught)``) with its words in their colours."""
    return _OUTCOME_WORDS.sub(lambda m: paint(m.group(0), _OUTCOME_ROLES[m.group(1) or m.group(2)]), text)


# not through printable: it paints its own escape codes, and its words are the operator's (scenario and agent
# names, outcomes), never the evidence's
def render_cells(matrix: Matrix, paint: Paint = PLAIN) -> str:
    """The certification table as aligned text: one row per cell, with its black-box facts."""
    headers, rows = _cell_rows(matrix)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    verdict = headers.index("verdict")

    def shown(index: int, value: str, width: int) -> str:
        padded = value.ljust(width)
        return _paint_outcome(value, paint) + padded[len(value):] if index == verdict else padded

    lines = [f"cells ({_modes_said(matrix)}):",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(shown(i, v, w) for i, (v, w) in enumerate(zip(row, widths, strict=True))).rstrip()
              for row in rows]
    return "\n".join(lines)


def render_matrix(matrix: Matrix, paint: Paint = PLAIN) -> str:
    """Agents (rows) x scenarios (columns), the legend, the catch rate and false alarms, then each
    miss and false alarm with what was found and where its evidence is. ``paint``: the terminal's colours
    (harness.colour); the text without them is the same."""
    cells = matrix.cells
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    agents = list(dict.fromkeys(c.agent for c in cells))
    by = {(c.agent, c.scenario): c for c in cells}
    width = max((len(a) for a in agents), default=0)
    lines = ["scenarios (columns): " + ", ".join(f"{i + 1}={s}" for i, s in enumerate(scenarios)),
             " " * (width + 1) + " ".join(f"{i + 1:>2}" for i in range(len(scenarios)))]
    for agent in agents:
        row = [" " + paint.verdict(_MATRIX_SYMBOLS[by[(agent, s)].verdict], by[(agent, s)].verdict)
               if (agent, s) in by else " -" for s in scenarios]
        lines.append(f"{agent:<{width}} " + " ".join(row))
    lines += ["",
              "legend: . passed   x failed (not targeted)   X caught where targeted   "
              "! missed where targeted   F reference agent failed (false alarm)"]
    lines += _rates(matrix)
    uncertified = matrix.uncertified()
    for cell in cells:
        if cell.verdict in ("missed", "false-alarm"):
            lines.append(f"  {paint(cell.verdict, 'alarm')}: {cell.agent} on {cell.scenario}: found "
                         f"{', '.join(cell.codes) or 'nothing'}; expected "
                         f"{', '.join(cell.expected_codes or []) or 'a pass'} ({cell.evidence})")
        elif cell in uncertified:
            why = cell.error or f"found {', '.join(cell.codes)}"
            lines.append(f"  {paint('failed', 'fail')}: {cell.agent} on {cell.scenario}: {why}"
                         + (f" ({cell.evidence})" if cell.evidence else ""))
    if cells:
        lines += ["", render_cells(matrix, paint)]
    return "\n".join(lines)


@_shown_text
def render_catalogue(scenarios: Iterable[Scenario], not_applicable: Mapping[str, str] | None = None) -> str:
    """One line per scenario: its name and the first sentence of its description (placed on a project's
    destination: where); then each of ``not_applicable`` (a project's destinations cannot take it) with why."""
    lines = []
    for scenario in scenarios:
        first = re.split(r"(?<=\.)\s", " ".join(scenario.description.split()), maxsplit=1)[0]
        lines.append(f"{scenario.name:34} {first}")
    for name, reason in (not_applicable or {}).items():
        lines.append(f"{name:34} not applicable here: {reason}")
    return "\n".join(lines)


@_shown_text
def render_audit_summary(summary: AuditSummary) -> str:
    """The text audit's last lines: the run-wide findings, then one line of counts."""
    lines = [line for finding in summary.run_findings for line in _finding_lines(finding, "")]
    first = 1
    for name, count in summary.files:  # a glob: its lines are numbered through its files
        lines.append(f"lines {first}-{first + count - 1}: {name}")
        first += count
    # the classification counts the distinct effects an operation's log names; a finding is a rule broken: an
    # operation can be classified healthy (one effect) and still break rules, so the line keeps the two apart
    counts = ", ".join(f"{n} {c}" for c, n in summary.classifications.items()) or "none"
    lines.append(f"{summary.file}: {summary.events} events, {_count(summary.operations, 'operation')} (classified "
                 f"by their effects: {counts}); {_count(summary.findings, 'finding')}, "
                 f"{_count(summary.malformed_lines, 'malformed line')}")
    return "\n".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@_shown_text
def render_exploration(state: Exploration) -> str:
    """What an exploration found: each shrunk failure with its schedule and reproducer, flakes, counts."""
    rate = state.runs / state.seconds if state.seconds else 0.0
    lines = [f"explored {state.base} with `{state.agent}`: {state.runs} run(s) of {state.drawn} drawn schedule(s) "
             f"in {state.seconds:.1f} s ({rate:.1f}/s), seed {state.seed if state.seed is not None else 'random'}, "
             f"stopped by {state.stopped_by}"]
    for found in state.found:
        status = "confirmed" if found.confirmed else \
            f"NOT confirmed: the rerun gave {', '.join(found.confirmation_codes) or 'a pass'}"
        lines.append(f"FAIL {', '.join(f'{c} {n}' for c, n in found.rule_names.items())} "
                     f"(first failed at schedule {found.first_seen_at}; {status})")
        lines += [f"     - {line}" for line in found.schedule.summary()]
        if found.reproducer:
            lines.append(f"     reproducer: {found.reproducer}")
        evidence = found.confirmation_evidence or found.evidence_dir
        if evidence:
            lines.append(f"     evidence: {evidence}")
    for run in state.also_failed:
        lines.append(f"ALSO FAILED {', '.join(run.codes)} (another failure, not shrunk; explore again once the "
                     "first is fixed):")
        lines += [f"     - {line}" for line in run.schedule.summary()]
        if run.evidence_dir:
            lines.append(f"     evidence: {run.evidence_dir}")
    for flake in state.flaky:
        again = ", ".join(flake.rerun_codes) or "passed"
        lines.append(f"FLAKY {', '.join(flake.first_codes)} once, then {again} on the rerun (not shrunk):")
        lines += [f"     - {line}" for line in flake.schedule.summary()]
        if flake.evidence_dir:
            lines.append(f"     evidence: {flake.evidence_dir}")
    if state.incomplete:
        lines.append(f"INCOMPLETE: the harness lost evidence of {len(state.incomplete)} run(s), not judged: "
                     + ", ".join(str(r.evidence_dir) for r in state.incomplete[:3]))
    if not state.found and not state.flaky:
        lines.append(f"PASS: no schedule made the agent fail ({state.runs} run(s))")
    return "\n".join(lines)


def exploration_dict(state: Exploration) -> dict[str, Any]:
    def found(f: Any) -> dict[str, Any]:
        return {"codes": list(f.codes), "rules": f.rule_names, "first_seen_at": f.first_seen_at,
                "schedule": f.schedule.to_dict(), "summary": f.schedule.summary(),
                "first_schedule": f.first_schedule.to_dict(), "reproducer": str(f.reproducer or ""),
                "confirmed": f.confirmed, "confirmation_codes": list(f.confirmation_codes),
                "evidence_dir": str(f.confirmation_evidence or f.evidence_dir or "")}

    return {"base": state.base, "agent": state.agent, "seed": state.seed, "examples": state.examples,
            "runs": state.runs, "drawn": state.drawn, "skipped": state.skipped, "seconds": round(state.seconds, 3),
            "agent_seconds": round(state.agent_seconds, 3), "run_seconds": round(state.run_seconds, 3),
            "stopped_by": state.stopped_by, "passed": not state.failed, "folder": str(state.folder),
            "found": [found(f) for f in state.found],
            "flaky": [{"first_codes": list(f.first_codes), "rerun_codes": list(f.rerun_codes),
                       "schedule": f.schedule.to_dict(), "evidence_dir": str(f.evidence_dir or "")}
                      for f in state.flaky],
            "also_failed": [{"codes": list(r.codes), "schedule": r.schedule.to_dict(),
                             "evidence_dir": str(r.evidence_dir or "")} for r in state.also_failed],
            "incomplete": [str(r.evidence_dir) for r in state.incomplete]}


@_shown_text
def render_images(rows: Iterable[dict[str, Any]]) -> str:
    """``images list``: one line per image of ours, kind, tags, size, age as the engine says it."""
    lines = [f"{row['kind'] or '?':8} {', '.join(row['tags']) or '<untagged> ' + row['id']:45} "
             f"{row['size'] / 1e6:7.0f} MB  {row['created'][:19].replace('T', ' ')}" for row in rows]
    return "\n".join(lines) if lines else "no images of ours (python -m harness images build makes them)"


@_shown_text
def render_containers(listing: dict[str, list[dict[str, str]]]) -> str:
    """``containers list``: our containers, networks and volumes with role, owner and run."""
    lines = []
    for kind, rows in listing.items():
        for row in rows:
            more = f" {row['status']:10} {row['image']}" if kind == "containers" else ""
            lines.append(f"{kind[:-1]:9} {row['name']:30} {row['role']:8} owner {row['owner']} "
                         f"run {row['run'] or '-'}{more}")
    return "\n".join(lines) if lines else "no containers, networks or volumes of ours"


@_shown_text
def render_removed(removed: dict[str, list[str]]) -> str:
    """``containers clean``: what it removed, by kind."""
    lines = [f"removed {len(names)} {kind}: {', '.join(names)}" for kind, names in removed.items() if names]
    return "\n".join(lines) if lines else "nothing of ours to remove"

