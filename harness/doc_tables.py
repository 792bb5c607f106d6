"""The tables the documentation shows, made from the registries so that they cannot drift: the scenario
catalogue (each scenario's ``summary``), the rules (``harness.checker.registry``), the claims table
(``harness.checker.claims``) and the fault actions (``harness.proxy.rules``). Each sits in a page between
``<!-- NAME:start ... -->`` and ``<!-- NAME:end -->``.

    python -m harness.doc_tables           # which blocks differ from the registries (exit 1 if any)
    python -m harness.doc_tables --write   # rewrite them

``tests/contract/test_doc_tables.py`` holds every block equal to what this makes.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def catalogue_table() -> str:
    """The bundled catalogue, in file order: name, what happens, what a correct agent does."""
    from harness.resources import catalogue_dir
    from harness.scenario import load

    lines = ["| scenario | what happens | a correct agent |", "|---|---|---|"]
    for path in sorted(catalogue_dir().glob("*.yaml")):
        scenario = load(path)
        summary = scenario.summary
        happens, correct = (summary.happens, summary.correct_agent) if summary else (scenario.description, "")
        lines.append(f"| `{scenario.name}` | {_cell(happens)} | {_cell(correct)} |")
    return "\n".join(lines)


def rules_table() -> str:
    """Every rule of the registry: code, name, scope, what it needs (docs/checker.md, "Rules"), when it holds."""
    from harness.checker.registry import RULES

    lines = ["| code | name | scope | needs | holds when |", "|---|---|---|---|---|"]
    for code, r in RULES.items():
        lines.append(f"| {code} | {r.name} | {r.scope} | {', '.join(sorted(r.requires)) or '-'} | {_cell(r.doc)} |")
    return "\n".join(lines)


def rule_count() -> str:
    from harness.checker.registry import RULES

    return f"{len(RULES)} rules with stable codes ({', '.join(_ranges(list(RULES)))})"


def fault_table() -> str:
    from harness.proxy.rules import actions_markdown

    return actions_markdown().strip("\n")


def claims_table() -> str:
    """The claims table (``harness.checker.claims``): what the log claims, what observes it, the tolerance, the rules
    and each mode's word."""
    from harness.checker import claims

    return claims.claims_markdown()


# block name -> (page, what goes between its markers)
BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "catalogue": ("scenarios.md", catalogue_table),
    "rule-count": ("checking.md", rule_count),
    "rules": ("checker.md", rules_table),
    "claims": ("contract.md", claims_table),
    "fault-actions": ("destinations-and-faults.md", fault_table),
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _ranges(codes: list[str]) -> list[str]:
    """H000, H001, H002, H005 -> H000-H002, H005 (consecutive numbers of one letter joined)."""
    out: list[str] = []
    start = prev = None
    for code in sorted(codes):
        number = int(code[1:])
        if prev is not None and code[0] == prev[0] and number == int(prev[1:]) + 1:
            prev = code
            continue
        if start is not None and prev is not None:
            out.append(start if start == prev else f"{start}-{prev}")
        start = prev = code
    if start is not None and prev is not None:
        out.append(start if start == prev else f"{start}-{prev}")
    return out


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {re.escape(name)}:start[^>]*-->)(.*?)(<!-- {re.escape(name)}:end -->)", re.DOTALL)


def stale(docs: Path = DOCS) -> dict[str, str]:
    """Each block whose page differs from the registry: name -> why."""
    found = {}
    for name, (page, make) in BLOCKS.items():
        match = _pattern(name).search((docs / page).read_text(encoding="utf-8"))
        if match is None:
            found[name] = f"docs/{page} has no <!-- {name}:start --> ... <!-- {name}:end --> markers"
        elif _inner(match.group(2)) != make():
            found[name] = f"docs/{page}: the {name} block differs from the registry"
    return found


def _inner(text: str) -> str:
    return text.strip("\n")


def _fill(body: str, match: re.Match[str]) -> str:
    return match.group(1) + body + match.group(3)


def write(docs: Path = DOCS) -> list[str]:
    """Rewrite every block from the registries; returns the pages changed."""
    changed = []
    for name, (page, make) in BLOCKS.items():
        path = docs / page
        text = path.read_text(encoding="utf-8")
        inline = name == "rule-count"  # a phrase in a sentence, not a block of lines
        body = make() if inline else "\n" + make() + "\n"
        new = _pattern(name).sub(functools.partial(_fill, body), text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.doc_tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the blocks from the registries")
    args = parser.parse_args(argv)
    if args.write:
        for page in write():
            print(f"rewrote docs/{page}")
        return 0
    problems = stale()
    for why in problems.values():
        print(why)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
