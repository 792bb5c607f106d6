"""The rule registry: rules added with ``@rule(code, name)``, keyed by code.

An operation rule is a plain function: it takes an ``OperationContext`` and yields ``(message,
evidence)`` pairs. A run rule (``scope="run"``) is a ``RunRule`` class: one object per run, fed the
log line by line and finished at the end, so that the scenario checker and the streaming audit judge
with the same object (``harness.checker.run_rules``). ``requires`` names what a rule needs to judge
anything: ``"wire"`` (a proxy journal and ledger, i.e. not an offline audit), ``"events"`` (our event
format, not the article's effect-ledger lines) or ``"black_box"`` (a run judged without an audit log, from
the journal and the ledger alone: such a rule runs only then, and every other rule never does). A
black-box operation rule takes an ``IntentContext`` (``harness.checker.attribution``): the intent's
operation as the wire shows it; a black-box run rule's ``finish`` gets a ``RunContext`` whose
``attribution`` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from harness.model.operation import exercise_tags
from harness.results.verdict import Finding

if TYPE_CHECKING:
    from harness.checker.context import OperationContext
    from harness.checker.run_context import RunContext
    from harness.evidence import Evidence


class RuleRegistryError(ValueError):
    """Raised at import time when two rules share a code or a name, or a code, scope or shape is wrong."""


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    scope: str  # "operation" | "run"
    requires: frozenset[str]
    func: Callable[..., Any]  # the function (operation rule) or the RunRule class (run rule)
    # the steps or facts of the operation model (harness.model.operation.exercise_tags) a history must show for
    # the rule to judge anything; empty: every history exercises it. A rule that found nothing on a history
    # showing none of them held only because nothing happened: "not exercised".
    exercised: frozenset[str] = frozenset()

    def exercised_by(self, tags: set[str] | frozenset[str]) -> bool:
        return not self.exercised or not self.exercised.isdisjoint(tags)

    @cached_property  # one string per rule: every operation's verdict lists the labels of its held rules
    def label(self) -> str:
        return f"{self.code} {self.name}"

    @property
    def doc(self) -> str:
        """The one-line description: the docstring's first paragraph, its lines joined."""
        paragraph: list[str] = []
        for line in (self.func.__doc__ or "").strip().splitlines():
            if not line.strip():
                break
            paragraph.append(line.strip())
        return " ".join(paragraph)


RULES: dict[str, Rule] = {}  # code -> rule, in code order
# what a rule may need (``requires``); "black_box" also says the rule judges nothing else
REQUIREMENTS = ("wire", "events", "black_box")
BLACK_BOX = "black_box"


class RunRule:
    """A run-scope rule: one object per run, fed in line order, finished at the end of the run.

    Both judges feed it alike (``harness.checker.run_rules.RunRules``): ``check()`` from an
    ``Evidence``, the streaming audit line by line. The hooks a rule overrides are all it hears of:

    - ``record(record, op)``: a parsed event of a kind in ``feeds``, once it is added to ``op``, its
      operation so far;
    - ``line(number, text, operation_id)``: every line's raw text, malformed ones too;
      ``might_find(text)`` may say cheaply that ``line`` finds nothing in a text (or in any text it
      contains: the audit asks it of a whole block of lines);
    - ``malformed(number, error)``: a line that is no event;
    - ``late(record, window)``: (the audit only) a line for an operation its window already judged;
    - ``operation_done(op)``: the operation's story is told (the audit judges it now);
    - ``finish(run)``: the end of the log (``run`` is the ``RunContext``, None in the streaming audit).

    The audit keeps a rule for the whole of a long log: its state must stay small (an id or a key
    per operation at most, never the records). Findings are reported with ``found``; ``code`` and ``name`` are
    the registry's. A run rule the offline audit applies must also be known to its SQL triage
    (tests/audit/test_triage.py holds the list), which sends whatever it could concern to the rules.
    """

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    feeds: ClassVar[frozenset[str]] = frozenset()  # the events record() is called for

    def __init__(self, evidence: Evidence, report: Callable[[Finding], None]) -> None:
        self.evidence = evidence  # what is known besides the log records: a bare log's is empty
        self._report = report

    def found(self, operation_id: str | None, message: str, evidence: list[dict[str, Any]]) -> None:
        self._report(Finding(self.code, self.name, operation_id, message, evidence))

    def where(self, line: int) -> str:
        """A line of the log as a finding names it: FILE:LINE."""
        return f"{self.evidence.log_name}:{line}"

    def record(self, record: dict[str, Any], op: OperationContext) -> None:
        pass

    def line(self, number: int, text: str, operation_id: str | None) -> None:
        pass

    def might_find(self, text: str) -> bool:
        return True

    def malformed(self, number: int, error: str) -> None:
        pass

    def late(self, record: dict[str, Any], window: int) -> None:
        pass

    def operation_done(self, op: OperationContext) -> None:
        pass

    def finish(self, run: RunContext | None) -> None:
        pass


def rule(code: str, name: str, *, scope: str = "operation", requires: tuple[str, ...] = (),
         exercised: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """Register a rule; a duplicate code or name is an error naming both rules."""
    if not (len(code) == 4 and code[0] == "H" and code[1:].isdigit()):
        raise RuleRegistryError(f"rule code {code!r} must look like H000")
    if scope not in ("operation", "run"):
        raise RuleRegistryError(f"rule {code} scope {scope!r}; valid: operation, run")
    unknown = set(requires) - set(REQUIREMENTS)
    if unknown:
        raise RuleRegistryError(f"rule {code} requires {sorted(unknown)}; valid: {', '.join(REQUIREMENTS)}")
    strangers = set(exercised) - set(exercise_tags())
    if strangers:
        raise RuleRegistryError(f"rule {code} exercised by {sorted(strangers)}, which the operation model does not "
                                f"name; valid: {', '.join(exercise_tags())}")

    def register(func: Any) -> Any:
        for other in RULES.values():
            if other.code == code or other.name == name:
                raise RuleRegistryError(
                    f"rule {code} {name!r} ({func.__qualname__}) clashes with {other.code} {other.name!r} "
                    f"({other.func.__qualname__}): codes and names must be unique")
        is_run_rule = isinstance(func, type) and issubclass(func, RunRule)
        if is_run_rule != (scope == "run"):
            raise RuleRegistryError(
                f"rule {code} {name!r} ({func.__qualname__}): " + (
                    "a run rule must be a RunRule subclass" if scope == "run" else
                    "an operation rule must be a function of an OperationContext (a RunRule needs scope='run')"))
        if is_run_rule:
            func.code, func.name = code, name
        RULES[code] = Rule(code, name, scope, frozenset(requires), func, frozenset(exercised))
        ordered = sorted(RULES.items())  # in code order, whichever module registers first
        RULES.clear()
        RULES.update(ordered)
        return func

    return register


def applicable(r: Rule, *, offline: bool, fmt: str = "events", black_box: bool = False) -> bool:
    """Whether a rule can judge anything: a wire rule needs the wire, an events rule our event format; in
    black-box mode (no audit log) only the black-box rules judge, and they judge nothing else."""
    if (BLACK_BOX in r.requires) != black_box:
        return False
    if "wire" in r.requires and offline:
        return False
    if "events" in r.requires and fmt != "events":
        return False
    return True
