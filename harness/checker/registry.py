"""The rule registry: plain functions added with ``@rule(code, name)``.

An operation rule takes an ``OperationContext`` and yields ``(message, evidence)`` pairs; a run rule
(``scope="run"``) takes the ``RunContext`` and yields ``(operation_id or None, message, evidence)``.
``requires`` names what a rule needs to judge anything: ``"wire"`` (a proxy journal and ledger, i.e.
not an offline audit) or ``"events"`` (our event format, not the article's effect-ledger lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class RuleRegistryError(ValueError):
    """Raised at import time when two rules share a code or a name, or a code is malformed."""


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    scope: str  # "operation" | "run"
    requires: frozenset[str]
    func: Callable[..., Any]

    @property
    def label(self) -> str:
        return f"{self.code} {self.name}"

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip().splitlines()[0] if self.func.__doc__ else ""


RULES: dict[str, Rule] = {}


def rule(code: str, name: str, *, scope: str = "operation", requires: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a rule; a duplicate code or name is an error naming both functions."""
    if not (len(code) == 4 and code[0] == "H" and code[1:].isdigit()):
        raise RuleRegistryError(f"rule code {code!r} must look like H000")
    if scope not in ("operation", "run"):
        raise RuleRegistryError(f"rule {code} scope {scope!r}; valid: operation, run")
    unknown = set(requires) - {"wire", "events"}
    if unknown:
        raise RuleRegistryError(f"rule {code} requires {sorted(unknown)}; valid: wire, events")

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        for other in RULES.values():
            if other.code == code or other.name == name:
                raise RuleRegistryError(
                    f"rule {code} {name!r} ({func.__qualname__}) clashes with {other.code} {other.name!r} "
                    f"({other.func.__qualname__}): codes and names must be unique")
        RULES[code] = Rule(code, name, scope, frozenset(requires), func)
        return func

    return register
