"""What the checker returns: findings, per-operation verdicts, and the run's verdict (all JSON-able)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.contract import BLACK_BOX_MODE, EVENTS_MODE
from harness.ndjson import Items

CLASSIFICATIONS = ("healthy", "duplicate", "key_conflict", "uncertain")
# What each classification counts, as a person reads it: the second article's classes count distinct effects and
# are no verdict (one effect may still break rules), so a report says this beside the operation's own PASS/FAIL
EFFECTS_SAID = {"healthy": "no duplicate effect", "duplicate": "more than one effect: a duplicate",
                "key_conflict": "one key over several payloads: a key conflict",
                "uncertain": "no effect proven, nor its absence: uncertain"}
assert set(EFFECTS_SAID) == set(CLASSIFICATIONS)
HELD, NOT_EXERCISED, FAILED = "held", "not exercised", "failed"  # a check's word on a run (Verdict.checks)
MODEL_CODE = "H060"  # the operation model's net (harness.checker.history): kept only where no named rule spoke
# A scenario's own expectation (final states, effect counts, the agent's exit) that failed: judged by
# the engine beside the rules, part of the verdict all the same.
EXPECTATION_CODE = "X001"
EXPECTATION_RULE = "scenario-expectation"


@dataclass(slots=True)
class Finding:
    """One broken rule: its code and name, the operation (None for run-wide findings), a sentence a
    person understands, and the evidence that proves it (log lines, journal entries, ledger rows).

    Slots, as ``AttemptVerdict``'s and ``OperationVerdict``'s: a verdict holds them per operation, hundreds of
    thousands in a large run."""

    code: str
    rule: str
    operation_id: str | None
    message: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    intent_id: str | None = None  # black-box mode: the intent judged (there are no operation ids)

    def to_dict(self) -> dict[str, Any]:
        # by hand, not dataclasses.asdict: asdict deep-copies every evidence dict (the audit's hot path)
        out = {"code": self.code, "rule": self.rule, "operation_id": self.operation_id, "message": self.message,
               "evidence": self.evidence}
        if self.intent_id is not None:
            out["intent_id"] = self.intent_id
        return out

    @property
    def subject(self) -> str | None:
        """What the finding is about, for a person: the operation, else the intent (black-box), else None."""
        if self.operation_id is not None:
            return self.operation_id
        return f"intent {self.intent_id}" if self.intent_id is not None else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(**data)


@dataclass(slots=True)
class AttemptVerdict:
    """One logged attempt beside what the wire and the destination saw of it."""

    attempt_id: str
    dispatch_state: str | None
    key: str | None
    line: int | None = None
    retry_of_attempt_id: str | None = None
    retry_reason: str | None = None
    wire: dict[str, Any] | None = None  # matched journal entry summary; None offline or unmatched
    destination_saw: list[dict[str, Any]] = field(default_factory=list)  # ledger request rows

    def to_dict(self) -> dict[str, Any]:
        return {"attempt_id": self.attempt_id, "dispatch_state": self.dispatch_state, "key": self.key,
                "line": self.line, "retry_of_attempt_id": self.retry_of_attempt_id,
                "retry_reason": self.retry_reason, "wire": self.wire, "destination_saw": self.destination_saw}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptVerdict:
        return cls(**data)


@dataclass(slots=True)
class OperationVerdict:
    operation_id: str
    intent_id: str | None
    classification: str
    state: str | None  # the last resolution's state, "open" when never resolved
    intent: dict[str, Any] | None = None
    attempts: list[AttemptVerdict] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)  # distinct effect refs (ledger, or log offline)
    findings: list[Finding] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # "H002 idempotency-key-reused", ... rules exercised that held
    # rules that found nothing because the history never reached what they judge (no retry, no doubt, ...)
    not_exercised: list[str] = field(default_factory=list)
    transitions: list[str] = field(default_factory=list)  # the operation model's rows the history took
    observations: list[dict[str, Any]] = field(default_factory=list)  # id, source, found, effect_refs, line
    resolution: dict[str, Any] | None = None  # the last resolution: state, evidence, effect_refs, reason, line

    @property
    def passed(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "intent_id": self.intent_id,
            "intent": self.intent,
            "classification": self.classification,
            "state": self.state,
            "attempts": [a.to_dict() for a in self.attempts],
            "effects": list(self.effects),
            "findings": [f.to_dict() for f in self.findings],
            "held": list(self.held),
            "not_exercised": list(self.not_exercised),
            "transitions": list(self.transitions),
            "observations": self.observations,
            "resolution": self.resolution,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OperationVerdict:
        return cls(**{**data, "attempts": [AttemptVerdict.from_dict(a) for a in data.get("attempts", [])],
                      "findings": [Finding.from_dict(f) for f in data.get("findings", [])]})


@dataclass
class IntentVerdict:
    """Black-box mode: one intent as the wire and the ledger show it, and what the black-box rules found.

    ``attempts`` are the writes attributed to it in the order they were sent (``WireAttempt.to_dict``:
    flow, key, what the client and the destination saw, how it was attributed); ``key_behaviour`` is
    "one key on N attempts", "no key", "key changed" or "-"; ``retry_gaps`` the seconds between one
    attempt's end and the next one's start, on the wire's clock."""

    intent_id: str
    intent: dict[str, Any]
    classification: str
    effects: list[str] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    key_behaviour: str = "-"
    retry_gaps: list[float] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    not_exercised: list[str] = field(default_factory=list)  # as OperationVerdict's: the wire never reached them

    @property
    def passed(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {"intent_id": self.intent_id, "intent": self.intent, "classification": self.classification,
                "effects": list(self.effects), "attempts": self.attempts, "key_behaviour": self.key_behaviour,
                "retry_gaps": list(self.retry_gaps), "findings": [f.to_dict() for f in self.findings],
                "held": list(self.held), "not_exercised": list(self.not_exercised)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IntentVerdict:
        return cls(**{**data, "findings": [Finding.from_dict(f) for f in data.get("findings", [])]})


@dataclass
class Verdict:
    """The run's verdict. ``passed`` is True when no rule found anything.

    ``mode`` says how it was judged: "events" (the agent's audit log beside the wire and the ledger:
    ``operations``) or "black_box" (the wire and the ledger alone: ``intents``, and ``not_judged``, the
    questions that mode cannot answer, in a person's words)."""

    operations: list[OperationVerdict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # all findings, incl. run-wide ones
    rules_run: list[str] = field(default_factory=list)
    mode: str = EVENTS_MODE
    intents: list[IntentVerdict] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)
    # black-box mode: the writes and effects no intent accounts for, each with why ({kind, reason, ...})
    unattributed: list[dict[str, Any]] = field(default_factory=list)
    # every applicable rule's word on the run: "held" (exercised by some operation and found nothing),
    # "not exercised" (no history reached what it judges), "failed"; and the model's rows the run took
    checks: dict[str, str] = field(default_factory=dict)
    transitions: list[str] = field(default_factory=list)
    # run on a project's own destinations (harness.catalogue): the catalogue's scenarios it cannot take, and why;
    # the coverage then points only at those that apply, and says what does not
    not_applicable: dict[str, str] = field(default_factory=dict)

    def checks_said(self, said: str) -> list[str]:
        return [label for label, word in self.checks.items() if word == said]

    @property
    def black_box(self) -> bool:
        return self.mode == BLACK_BOX_MODE

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def rules_passed(self) -> bool:
        """The checker's rules alone held (the scenario's expectations, X001, aside)."""
        return all(f.code == EXPECTATION_CODE for f in self.findings)

    def add_findings(self, findings: list[Finding]) -> None:
        """Findings judged beside the rules (the scenario's expectations): into the run's list, and into
        their operation's when they name one the verdict holds."""
        ops = {op.operation_id: op for op in self.operations}
        intents = {intent.intent_id: intent for intent in self.intents}
        for finding in findings:
            self.findings.append(finding)
            if finding.operation_id in ops:
                ops[finding.operation_id].findings.append(finding)
            elif finding.intent_id in intents:
                intents[finding.intent_id].findings.append(finding)
        self.findings.sort(key=lambda f: (f.code, f.operation_id or ""))

    def add_expectation_failures(self, failures: list[str]) -> None:
        """An expectation failure known only as a sentence (a verdict file written before X001 findings
        were part of the verdict): an X001 finding without evidence, unless one says it already."""
        said = {f.message for f in self.findings if f.code == EXPECTATION_CODE}
        self.add_findings([Finding(EXPECTATION_CODE, EXPECTATION_RULE, None, failure)
                           for failure in failures if failure not in said])

    def by_code(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]

    @property
    def codes(self) -> set[str]:
        return {f.code for f in self.findings}

    def operation(self, operation_id: str) -> OperationVerdict:
        for op in self.operations:
            if op.operation_id == operation_id:
                return op
        raise KeyError(f"no operation {operation_id!r} in the verdict; have: "
                       f"{', '.join(o.operation_id for o in self.operations) or 'none'}")

    def to_dict(self, *, streamed: bool = False) -> dict[str, Any]:
        """``streamed``: the operations, intents and findings as ``Items``, each made as ``write_json_file`` writes
        it (verdict.json), not all at once."""
        def items(sources: list[Any], make: Callable[[Any], dict[str, Any]]) -> Any:
            return Items(sources, make) if streamed else [make(source) for source in sources]

        return {
            "passed": self.passed,
            "mode": self.mode,
            "operations": items(self.operations, OperationVerdict.to_dict),
            "intents": items(self.intents, IntentVerdict.to_dict),
            "findings": items(self.findings, Finding.to_dict),
            "rules_run": list(self.rules_run),
            "not_judged": list(self.not_judged),
            "unattributed": list(self.unattributed),
            "checks": dict(self.checks),
            "transitions": list(self.transitions),
            **({"not_applicable": dict(self.not_applicable)} if self.not_applicable else {}),
        }

    def document(self, *, streamed: bool = False) -> dict[str, Any]:
        """The verdict as a result file's fields (verdict.json, ``check --format json``): ``verdict_passed`` the
        verdict's (it holds the scenario's expectations as X001 findings), ``rules_passed`` the checker's rules
        alone (what ``verdict_passed`` meant before X001 joined it). ``streamed``: as ``to_dict``'s."""
        data = self.to_dict(streamed=streamed)
        data["verdict_passed"] = data.pop("passed")
        data["rules_passed"] = self.rules_passed
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of ``to_dict`` (verdicts cross process boundaries as data, e.g. pytest-xdist)."""
        return cls(operations=[OperationVerdict.from_dict(o) for o in data.get("operations", [])],
                   findings=[Finding.from_dict(f) for f in data.get("findings", [])],
                   rules_run=list(data.get("rules_run", [])), mode=data.get("mode", EVENTS_MODE),
                   intents=[IntentVerdict.from_dict(i) for i in data.get("intents", [])],
                   not_judged=list(data.get("not_judged", [])), unattributed=list(data.get("unattributed", [])),
                   checks=dict(data.get("checks", {})), transitions=list(data.get("transitions", [])),
                   not_applicable=dict(data.get("not_applicable") or {}))


@dataclass
class Judgement:
    """What judging one run's evidence gives (``harness.checker.judge``): the verdict, the scenario's own
    expectations that failed (as sentences; they are X001 findings of the verdict too), what the wire and the
    ledger show whatever the mode (``Attribution.facts``), and why the evidence is incomplete (then nothing
    is judged and the verdict is empty)."""

    verdict: Verdict
    expectation_failures: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict.passed and not self.incomplete
