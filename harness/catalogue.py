"""The catalogue as fault patterns over roles: each catalogue scenario put on a project's own destinations.

A catalogue scenario says what it needs of its destination (``requires:``, ``harness.scenario.Needs``): a write
that commits, an idempotency key or none, a lookup or none, SSH or MCP. ``place`` puts it on the first of a
project's destinations (``harness.project``) that has all of it, with the project's intents, agent and mode: the
same faults on the project's write (its method and path, its lookup's path, its tool), the same expectations on its
intents. A scenario no destination can take is ``NotApplicable``, with the reason a user reads ("billing declares
no lookup: ..."), never skipped in silence.

Which intents a scenario takes: a one-intent scenario the first intent (in the configuration's order) whose
destination meets its needs; a two-intent one the first two intents of one destination and one operation (an SSH
one: of the families it names, in order), the second superseding the first where the scenario's does
(payload_changed: its params are the corrected payload, so they must differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fake_destinations.services import CREATE_ASYNC, SERVICES
from fake_destinations.spec import DestinationSpec, describe
from harness.contract import DestinationContract
from harness.errors import ScenarioError
from harness.project import Project
from harness.resources import catalogue, catalogue_dir
from harness.scenario import Intent, Needs, Scenario, load

# the options a scenario sets on its destination to make its fault (a key kept 1 s, a lagging index): carried onto
# the project's destination; the others (service, idempotency, lookup) are what it needs, not what it sets
KNOBS = ("retention_seconds", "lookup_lag_seconds", "processing_delay_seconds", "async_completion_seconds",
         "failures", "rate_limit")
# a destination's own failures, by family (``FaultRule.family`` says the proxy's)
FAILURE_FAMILIES = {"drop_after_exec": "lost_response", "error_before_commit": "error_answer",
                    "error_after_commit": "error_answer", "rate_limited": "rate_limited"}
@dataclass(frozen=True)
class NotApplicable:
    """A catalogue scenario no destination of the project can take, and why (for the run's summary and the
    verdict's coverage)."""

    name: str
    reason: str
    source: Path | None = None
    markers: tuple[str, ...] = ()  # the pattern's (its transport, its faults): `pytest -m http` lists it too


def markers(scenario: Scenario) -> list[str]:
    """The scenario's markers: the transports of its destinations, the families of its faults, crashes and async
    writes (each a key of ``harness.markers.MARKERS``)."""
    found: list[str] = []
    for spec in scenario.destinations.values():
        found.append(describe(spec).reached_over)
        found += [FAILURE_FAMILIES[f.fault] for f in spec.failures]
        if any(op.action == CREATE_ASYNC for op in SERVICES[spec.service].operations):
            found.append("async")
    found += [rule.family for rule in scenario.faults]
    if scenario.restart_agent is not None:
        found.append("crash")
    if scenario.restart_destinations is not None:
        found.append("destination_restart")
    return list(dict.fromkeys(found))


def scenario_for(path: Path, project: Project | None) -> Scenario | NotApplicable:
    """The scenario a front end runs for the file at ``path``: as written without a project; with one, a catalogue
    scenario placed on its destinations (``place``), and a team's own file with the project's agent and mode
    where it names none."""
    scenario = load(path)
    if project is None:
        return scenario
    if path.resolve().parent == catalogue_dir().resolve():
        placed = place(scenario, project)
        if isinstance(placed, NotApplicable):
            return placed
        skipped = _not_applicable(project)
        return placed.model_copy(update={"not_applicable": {n: r for n, r in skipped.items() if n != placed.name}})
    update: dict[str, Any] = {}
    if scenario.agent is None and project.agent_command() is not None:
        update["agent"] = project.agent_command()
    if "agent_log" not in scenario.model_fields_set:
        update["agent_log"] = project.agent_log
    return scenario.model_copy(update=update) if update else scenario


def _not_applicable(project: Project) -> dict[str, str]:
    """The catalogue's scenarios ``project`` cannot take, and why: placed once per project (kept on it)."""
    if "not_applicable" not in project.memo:
        project.memo["not_applicable"] = {
            outcome.name: outcome.reason for path in catalogue()
            if isinstance(outcome := place(load(path), project), NotApplicable)}
    return dict(project.memo["not_applicable"])


def place(scenario: Scenario, project: Project) -> Scenario | NotApplicable:
    """``scenario`` (a catalogue pattern) on ``project``'s destinations and intents, or why it cannot be."""
    def skip(reason: str) -> NotApplicable:
        return NotApplicable(scenario.name, reason, scenario.source, tuple(markers(scenario)))

    if not scenario.requires:
        return skip("the scenario declares no pattern (requires:), so it runs only on its own destinations")
    if len(scenario.requires) != 1:
        return skip("the scenario's pattern has several roles; only one-destination patterns are placed")
    (role, needs), = scenario.requires.items()
    if needs.delegation and not project.delegation:
        return skip("it needs an agent that hands an intent to a worker process (the contract's delegation); "
                    "set `delegation = true` in the configuration if yours does")
    reasons: list[str] = []
    for name, spec in project.destinations.items():
        contract = describe(spec)
        for group in _groups(needs, [i for i in project.intents if i.destination == name]):
            taken = group[:needs.intents]
            unmet = needs.unmet(name, contract, [i.kind for i in taken])
            if unmet is None and len(taken) < needs.intents:
                unmet = (f"{name}'s {taken[0].kind} has {len(taken)} intent, and this scenario takes "
                         f"{needs.intents}: add another [[tool.retry-harness.intents]] of it")
            if unmet is None:
                unmet = _same_payload(scenario, taken)
            if unmet is not None:
                reasons.append(unmet)
                continue
            try:
                return _placed(scenario, role, needs, project, name, spec, contract, taken)
            except (ValidationError, ScenarioError, ValueError) as exc:
                reasons.append(f"{name} cannot take the scenario's own settings: {_first_line(exc)}")
    if not reasons:
        reasons.append("no destination of the configuration has an intent")
    return skip("; ".join(dict.fromkeys(reasons)))


def _groups(needs: Needs, intents: Sequence[Intent]) -> list[list[Intent]]:
    """The runs of intents a scenario may take on one destination: all of them in order (an SSH pattern names
    each intent's family), else those of each operation."""
    if not intents:
        return []
    if needs.families is not None:
        return [list(intents)]
    by_kind: dict[str, list[Intent]] = {}
    for intent in intents:
        by_kind.setdefault(intent.kind, []).append(intent)
    return list(by_kind.values())


def _same_payload(scenario: Scenario, taken: Sequence[Intent]) -> str | None:
    for pattern_intent, intent in zip(scenario.intents, taken, strict=True):
        if pattern_intent.supersedes is None:
            continue
        first = taken[[i.intent_id for i in scenario.intents].index(pattern_intent.supersedes)]
        if first.params == intent.params:
            return (f"its second intent corrects the first one's payload, and {intent.intent_id!r} has the same "
                    f"params as {first.intent_id!r}: give it the corrected payload")
    return None


def _placed(scenario: Scenario, role: str, needs: Needs, project: Project, name: str, spec: DestinationSpec,
            contract: DestinationContract, taken: Sequence[Intent]) -> Scenario:
    own = scenario.destinations[role]
    own_contract = describe(own)
    destination = spec.model_dump(mode="json")
    destination.update({k: getattr(own, k) for k in KNOBS if k in own.model_fields_set})
    if needs.annotations is not None and destination.get("tools"):
        for intent in taken:  # the scenario's fault is the hint itself: the tool publishes the scenario's
            destination["tools"][intent.kind]["annotations"] = dict(needs.annotations)
    pairs = list(zip(scenario.intents, taken, strict=True))
    ids = {p.intent_id: t.intent_id for p, t in pairs}
    writes = {_where(own_contract, p.kind): _where(contract, t.kind) for p, t in pairs}
    lookups = {(own_contract.lookup.method, own_contract.lookup.path): (contract.lookup.method, contract.lookup.path)
               } if own_contract.lookup is not None and contract.lookup is not None else {}
    faults = []
    for rule in scenario.faults:
        data = rule.model_dump(mode="json", exclude_unset=True)
        match = dict(data.get("match") or {})
        if match.get("destination") == role:
            match["destination"] = name
        if "tool" in match:
            match["tool"] = writes.get(("tools/call", match["tool"]), ("", match["tool"]))[1]
        where = (str(match.get("method")), str(match.get("path")))
        found = writes.get(where) or lookups.get(where)
        if found is not None:  # a fault on the pattern's write or lookup lands on the project's
            match["method"], match["path"] = found
        data["match"] = match
        faults.append(data)
    intents = [{"intent_id": t.intent_id, "kind": t.kind, "destination": name, "params": t.params,
                **({"supersedes": ids[p.supersedes]} if p.supersedes else {}),
                **({"delegate_to_worker": True} if p.delegate_to_worker else {})}
               for p, t in pairs]
    expect = scenario.expect.model_dump(mode="json")
    expect["states"] = {ids[k]: v for k, v in expect["states"].items() if k in ids}
    expect["effects"] = {name if k == role else k: v for k, v in expect["effects"].items()}
    data = scenario.model_dump(mode="json", exclude={"source", "requires", "agent", "destinations", "faults",
                                                     "intents", "expect"}, exclude_unset=True)
    placement = f"{name}'s {taken[0].kind}" + (f" ({', '.join(t.intent_id for t in taken)})")
    data.update({
        "description": f"{scenario.description.rstrip()}\nPlaced on {placement}, in place of the catalogue's {role}.",
        "destinations": {name: destination}, "faults": faults, "intents": intents, "expect": expect,
        "agent_log": project.agent_log, "source": scenario.source,
    })
    if project.agent_timeout_seconds is not None:
        data["agent_timeout_seconds"] = project.agent_timeout_seconds
    command = project.agent_command()
    if command is not None:
        data["agent"] = command
    return Scenario.model_validate(data)


def _where(contract: DestinationContract, kind: str) -> tuple[str, str]:
    operation = contract.operations[kind]
    return operation.method, operation.path or operation.command or kind


def _first_line(exc: Exception) -> str:
    return str(exc).strip().split("\n", 1)[0]
