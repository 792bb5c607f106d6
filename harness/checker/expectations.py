"""X001: what a scenario itself demands beyond the generic rules (its ``expect``: final states, effect counts, and
an agent that finished in time; its exit status is a rule's, H063), judged as findings of the verdict with their
evidence.

The engine keeps the expectations in context.json (``harness.engine.expectations_of``), so that a run and a later
``check`` of its folder judge them alike, both through ``harness.checker.judge``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.checker.context import effect_ref_row
from harness.contract import AGENT_STDERR_FILE, ContextKey
from harness.results.scenario_result import AgentRun
from harness.results.verdict import EXPECTATION_CODE, EXPECTATION_RULE, Finding
from harness.safe_files import UnsafeFile, open_regular

_ANY_SIZE = 1 << 62  # only its last 8 KiB are read


def expectation_failures(expect: Mapping[str, Any], verdict: Any, runs: Sequence[AgentRun],
                         effects: list[dict[str, Any]]) -> list[str]:
    """What the scenario itself demands beyond the generic rules, as sentences (``expectation_findings``)."""
    return [f.message for f in expectation_findings(expect, verdict, runs, effects)]


def stderr_tail(evidence: Any, lines: int = 5) -> list[str]:
    """The last lines the agent wrote on stderr (agent.stderr in its folder): where a crash says why."""
    folder = getattr(evidence, "folder", None)
    if folder is None:
        return []
    try:  # a regular file only: a FIFO left at the name would block the read for ever
        with open_regular(Path(folder) / AGENT_STDERR_FILE, _ANY_SIZE) as stream:
            stream.seek(0, 2)
            stream.seek(max(0, stream.tell() - 8192))
            text = stream.read().decode("utf-8", "replace")
    except (OSError, UnsafeFile):  # nothing said
        return []
    kept = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return [line[:300] for line in kept[-lines:]]


def agent_broken(evidence: Any, runs: Sequence[AgentRun]) -> Finding | None:
    """The agent could not start, or exited non-zero without doing anything (no audit line, nothing on the wire,
    nothing at a destination): broken, not wrong. One X001 finding that says so with its stderr, instead of the
    rules' and the expectations' account of the work it never did."""
    agent = getattr(evidence, "agent", None) or {}
    tail = stderr_tail(evidence)
    said = f"; its stderr ends: {tail[-1]}" if tail else "; it wrote nothing on stderr"
    file_ref = {"source": "file", "path": AGENT_STDERR_FILE, "tail": tail}
    if agent.get(ContextKey.START_ERROR):
        return Finding(EXPECTATION_CODE, EXPECTATION_RULE, None,
                       f"the agent could not start: {agent[ContextKey.START_ERROR]}", [
                           {"source": "context", "agent_command": agent.get(ContextKey.COMMAND)}])
    last = runs[-1] if runs else None
    if last is None or last.timed_out or last.exit_status in (0, None):
        return None
    if evidence.events or evidence.log_errors or evidence.journal or evidence.requests or evidence.effects:
        return None
    return Finding(EXPECTATION_CODE, EXPECTATION_RULE, None, (
        f"the agent exited with status {last.exit_status} after {last.seconds:.2f} s without doing anything (no "
        f"audit event, no request): it is broken, not judged wrong{said} ({AGENT_STDERR_FILE})"), [
        {"source": "context", "agent_run": len(runs), "exit_status": last.exit_status,
         "seconds": round(last.seconds, 2)}, file_ref])


def expectation_findings(expect: Mapping[str, Any], verdict: Any, runs: Sequence[AgentRun],
                         effects: list[dict[str, Any]]) -> list[Finding]:
    """What the scenario itself demands beyond the generic rules (``harness.engine.expectations_of``): final states
    and effect counts, and an agent that finished in time (its exit status is the contract's rule, H063). Each
    failure is an X001 finding with its evidence: the resolution's log line and the ledger rows that contradict it.
    A black-box verdict has no states to hold against (no log): only the effects and the time limit apply."""
    def finding(operation_id: str | None, message: str, evidence: list[dict[str, Any]]) -> Finding:
        return Finding(EXPECTATION_CODE, EXPECTATION_RULE, operation_id, message, evidence)

    found: list[Finding] = []
    last = runs[-1] if runs else None
    if last is not None:
        run_ref = {"source": "context", "agent_run": len(runs), "exit_status": last.exit_status,
                   "timed_out": last.timed_out, "seconds": round(last.seconds, 2)}
        if last.timed_out:
            found.append(finding(None, f"the agent did not finish within {expect['agent_timeout_seconds']:g} s "
                                       "(it was stopped; its evidence so far was judged)", [run_ref]))
    live = [e for e in effects if not e.get("replay")]
    live_by_ref: dict[Any, list[dict[str, Any]]] = {}
    for effect in live:  # an index, so that each intent's rows are found without reading the ledger again
        ref = effect.get("effect_ref")
        live_by_ref.setdefault(ref if isinstance(ref, (str, int, float)) else repr(ref), []).append(effect)

    def live_of(refs: list[Any]) -> list[dict[str, Any]]:
        """The live effect rows of these refs, in ledger order."""
        rows = [e for ref in dict.fromkeys(r for r in refs if isinstance(r, (str, int, float)))
                for e in live_by_ref.get(ref, ())]
        return sorted(rows, key=lambda e: position[id(e)])

    position = {id(e): n for n, e in enumerate(live)}
    by_intent = {op.intent_id: op for op in verdict.operations}
    # intents declared under another intent's operation id (H032): they have an operation event, not one of their own
    borrowed = {e["intent_id"]: f.operation_id for f in verdict.findings if f.code == "H032"
                for e in f.evidence if e.get("intent_id")}
    states = {} if getattr(verdict, "black_box", False) else expect.get("states", {})
    for intent_id, allowed in states.items():
        op = by_intent.get(intent_id)
        state = getattr(op, "state", None)
        wanted = " or ".join(allowed)
        if op is None and intent_id in borrowed:
            found.append(finding(borrowed[intent_id], (
                f"intent {intent_id} has no operation of its own: it was declared under {borrowed[intent_id]}, "
                f"another intent's operation id (H032); a correct agent ends it {wanted} in this scenario"),
                [{"source": "context", "intent_id": intent_id, "expected_state": wanted}]))
        elif op is None:
            found.append(finding(None, (f"intent {intent_id} ended without an operation; a correct agent ends it "
                                        f"{wanted} in this scenario"),
                                 [{"source": "context", "intent_id": intent_id, "expected_state": wanted}]))
        elif state not in allowed:
            resolution = op.resolution or {}
            evidence: list[dict[str, Any]] = [{"source": "log", "line": resolution.get("line"), "event": "resolution",
                                               "state": state}] if resolution else [
                {"source": "context", "intent_id": intent_id, "state": state, "expected_state": wanted}]
            evidence += [effect_ref_row(e) for e in live_of(op.effects)]
            held = f"; the destination holds {', '.join(op.effects)} for it" if op.effects else ""
            found.append(finding(op.operation_id, (
                f"intent {intent_id} ended {state} ({op.operation_id}{held}); a correct agent ends it {wanted} in "
                f"this scenario"), evidence))
    for destination, expected in expect.get("effects", {}).items():
        # one count, or the counts a correct agent may leave
        counts = [expected] if isinstance(expected, int) else list(expected)
        rows = [e for e in live if e.get("destination") == destination]
        refs = sorted({e["effect_ref"] for e in rows})
        if len(refs) not in counts:
            first: dict[str, dict[str, Any]] = {}
            for row in rows:
                first.setdefault(row["effect_ref"], row)
            found.append(finding(None, f"destination {destination} holds {len(refs)} distinct effect(s) {refs}; "
                                       f"expected {' or '.join(map(str, counts))}",
                                 [effect_ref_row(r) for r in first.values()] or [
                                     {"source": "ledger", "table": "effects", "destination": destination,
                                      "rows": 0}]))
    return found
