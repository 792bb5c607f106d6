"""The run-scope rules of one run, fed in line order: the one feed both judges use.

``check()`` feeds them from an ``Evidence`` (``feed_evidence``, while the run's operations are built);
the streaming audit feeds them line by line as it reads, and tells them when its window judges an
operation. Either way a rule hears the same calls in the same order, so it finds the same things.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.checker.registry import RULES, RunRule, applicable
from harness.results.verdict import Finding

if TYPE_CHECKING:
    from harness.checker.context import OperationContext
    from harness.checker.run_context import RunContext
    from harness.evidence import Evidence


def _hears(rule: RunRule, hook: str) -> bool:
    return getattr(type(rule), hook) is not getattr(RunRule, hook)


class RunRules:
    """The applicable run rules of one run (in code order), each reporting its findings to ``report``."""

    def __init__(self, evidence: Evidence, report: Callable[[Finding], None], *, offline: bool,
                 black_box: bool = False) -> None:
        self.rules: list[RunRule] = [
            r.func(evidence, report) for r in sorted(RULES.values(), key=lambda r: r.code)
            if r.scope == "run" and applicable(r, offline=offline, black_box=black_box)]
        # each hook's rules, only those that hear it: looked up once, called per line or per operation
        self.record_hooks: dict[str, tuple[Callable[[dict[str, Any], OperationContext], None], ...]] = {}
        for r in self.rules:
            for kind in r.feeds:
                self.record_hooks[kind] = (*self.record_hooks.get(kind, ()), r.record)
        self.line_rules = [r for r in self.rules if _hears(r, "line")]
        self.done_hooks = tuple(r.operation_done for r in self.rules if _hears(r, "operation_done"))
        self._malformed = [r for r in self.rules if _hears(r, "malformed")]
        self._late = [r for r in self.rules if _hears(r, "late")]

    def record(self, record: dict[str, Any], op: OperationContext) -> None:
        for hook in self.record_hooks.get(record["event"], ()):
            hook(record, op)

    def line(self, number: int, text: str, operation_id: str | None) -> None:
        for r in self.line_rules:
            r.line(number, text, operation_id)

    def might_find(self, text: str) -> bool:
        """False when no rule's ``line`` can find anything in ``text`` (or in any line it holds)."""
        return any(r.might_find(text) for r in self.line_rules)

    def malformed(self, number: int, error: str) -> None:
        for r in self._malformed:
            r.malformed(number, error)

    def late(self, record: dict[str, Any], window: int) -> None:
        for r in self._late:
            r.late(record, window)

    def operation_done(self, op: OperationContext) -> None:
        for hook in self.done_hooks:
            hook(op)

    def finish(self, run: RunContext | None) -> None:
        for r in self.rules:
            r.finish(run)

    def feed_evidence(self, evidence: Evidence, add: Callable[[dict[str, Any]], OperationContext]) -> None:
        """The evidence's log in line order, as the audit reads it: each event once ``add`` has put it into
        its operation, each malformed line, and every line's raw text after what it held."""
        errors = sorted(evidence.log_errors, key=lambda e: e["line"])
        at = 0
        text_of = _LineTexts(evidence)

        def malformed_before(number: float) -> None:
            nonlocal at
            while at < len(errors) and errors[at]["line"] < number:
                error = errors[at]
                at += 1
                self.malformed(error["line"], error["error"])
                if text := text_of(error["line"]):
                    self.line(error["line"], text, None)

        for record in evidence.events:
            number = record.get("_line")
            if number is not None:
                malformed_before(number)
            op = add(record)
            self.record(record, op)
            if number is not None and (text := text_of(number)):
                self.line(number, text, op.operation_id)
        malformed_before(float("inf"))
        text_of.close()


class _LineTexts:
    """The log's text of a line by its number ("" for none), read again as the feed asks, which is in line order:
    a line before the last one asked starts the reading over (events put out of order by hand)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.lines = evidence.log_lines()
        self.number, self.text = 0, ""

    def __call__(self, number: int | None) -> str:
        if number is None or number < 1:
            return ""
        if number < self.number:
            self.close()
            self.lines, self.number, self.text = self.evidence.log_lines(), 0, ""
        while self.number < number:
            line = next(self.lines, None)
            if line is None:
                return ""
            self.number, self.text = line
        return self.text if self.number == number else ""

    def close(self) -> None:
        self.lines.close()  # its file closed now, not when the generator is collected
