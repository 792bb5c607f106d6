"""Which scenarios of the catalogue exercise which checks and which rows of the operation model: measured by
running the reference agent over the catalogue, never kept by hand.

``harness/catalogue_coverage.json`` holds the last measurement (``python -m harness coverage --write``
makes it; tests/model/test_coverage.py holds it equal to a fresh run of the catalogue). A run's report
reads it to say, of a check its scenario did not exercise, which scenarios would; ``pytest --scenario``
over several scenarios ends with a coverage line (``coverage_line``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from harness.model.operation import PATHS, TRANSITIONS
from harness.resources import package_path
from harness.results.verdict import HELD, Verdict

COVERAGE_FILE = "catalogue_coverage.json"
# rows a scenario may or may not take by the machine's timing (a lookup while a destination restarts gets an
# answer or not): the coverage test tolerates them coming and going
TIMING_DEPENDENT = frozenset({"observe_inconclusive"})


def coverage_path() -> Path:
    return package_path(COVERAGE_FILE)


@cache
def load() -> dict[str, dict[str, list[str]]]:
    """scenario -> {"checks": the checks its reference run exercised, "transitions": the model's rows taken}.
    Empty when the file is missing (a checkout that never measured: the reports then name no scenario)."""
    try:
        data = json.loads(coverage_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    scenarios = data.get("scenarios") if isinstance(data, dict) else None
    return scenarios if isinstance(scenarios, dict) else {}


def entry(verdict: Verdict) -> dict[str, list[str]]:
    """What one run exercised, as the coverage file keeps it."""
    return {"checks": sorted(label for label, said in verdict.checks.items() if said == HELD),
            "transitions": sorted(verdict.transitions)}


def scenarios_exercising(check: str, measured: Mapping[str, Mapping[str, list[str]]] | None = None) -> list[str]:
    """The catalogue's scenarios whose reference run exercised ``check``; for a black-box check (the file holds
    the runs judged with their log), those that exercised a check waiting for the same steps or facts."""
    from harness.checker import RULES

    measured = load() if measured is None else measured
    rule = RULES.get(check.split(" ", 1)[0])
    if rule is not None and "black_box" in rule.requires and rule.exercised:
        alike = {r.label for r in RULES.values() if "black_box" not in r.requires and r.exercised & rule.exercised}
        return sorted(name for name, seen in measured.items() if alike & set(seen.get("checks", ())))
    return sorted(name for name, seen in measured.items() if check in seen.get("checks", ()))


def _path_of(check: str) -> str:
    from harness.checker import RULES

    rule = RULES.get(check.split(" ", 1)[0])
    tags = sorted(rule.exercised) if rule is not None else []
    for tag in tags:
        if tag in PATHS:
            return PATHS[tag]
    return tags[0] if tags else "other"


def not_exercised_text(checks: Iterable[str], *, limit: int = 3, not_applicable: Iterable[str] = ()) -> str:
    """'retry path: see request_lost, response_lost_key_replay; ...': the checks grouped by the path of the
    model they wait for, with the catalogue's scenarios that exercise most of each group (never one of
    ``not_applicable``: a project's destinations cannot take it)."""
    left_out = set(not_applicable)
    groups: dict[str, list[str]] = {}
    for check in checks:
        groups.setdefault(_path_of(check), []).append(check)
    parts = []
    for path, members in groups.items():
        counts: dict[str, int] = {}
        for check in members:
            for name in scenarios_exercising(check):
                if name not in left_out:
                    counts[name] = counts.get(name, 0) + 1
        best = sorted(counts, key=lambda n: (-counts[n], n))[:limit]
        none = "no scenario that applies here" if left_out else "no scenario of the catalogue"
        parts.append(f"{path}: see {', '.join(best)}" if best else f"{path}: {none}")
    return "; ".join(parts)


def checks_summary(verdict: Verdict) -> str:
    """'9 checks exercised and held; 27 not exercised by this scenario (retry path: see ...)'."""
    held = verdict.checks_said(HELD)
    idle = verdict.checks_said("not exercised")
    text = f"{len(held)} checks exercised and held"
    if idle:
        text += (f"; {len(idle)} not exercised by this scenario "
                 f"({not_exercised_text(idle, not_applicable=verdict.not_applicable)})")
    return text


def not_applicable_lines(not_applicable: Mapping[str, str]) -> list[str]:
    """What a project's destinations cannot be tested on, one line per reason: 'not applicable here (billing
    declares no lookup: ...): response_lost, lookup_lag'."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in sorted(not_applicable.items()):
        by_reason.setdefault(reason, []).append(name)
    return [f"not applicable here ({reason}): {', '.join(names)}" for reason, names in by_reason.items()]


def coverage_line(verdicts: Iterable[Verdict]) -> str | None:
    """The catalogue run's last word: how much of the model and of the rules the agent was tested on."""
    verdicts = [v for v in verdicts if not v.black_box and v.checks]
    if not verdicts:
        return None
    taken = {t for v in verdicts for t in v.transitions}
    rows = {t.label for t in TRANSITIONS}
    exercised = {label for v in verdicts for label, said in v.checks.items() if said != "not exercised"}
    checks = {label for v in verdicts for label in v.checks}
    never = sorted(checks - exercised)
    tail = f" (never exercised: {', '.join(c.split(' ', 1)[0] for c in never)})" if never else ""
    return (f"coverage: {len(taken & rows)}/{len(rows)} transitions of the operation model, {len(exercised)}/"
            f"{len(checks)} checks exercised over {len(verdicts)} run(s){tail}")


def write(measured: Mapping[str, Any], path: Path | None = None) -> Path:
    path = path or coverage_path()
    text = json.dumps({"about": "what each catalogue scenario exercises with the reference agent; made by "
                                "`python -m harness coverage --write`", "scenarios": dict(sorted(measured.items()))},
                      indent=1, sort_keys=False)
    path.write_text(text + "\n", encoding="utf-8")
    load.cache_clear()
    return path
