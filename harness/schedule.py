"""A fault schedule: the part of a scenario that exploration varies, and how it becomes a scenario.

A :class:`Schedule` holds the proxy's fault rules, the planned crashes (agent, destinations) and
overrides of destination options (retention, lookup lag, the destination's own failures...).
``apply`` lays it over a base scenario, whose destinations, contracts and intents stay as they are.
The base's faults, crashes and expectations are dropped: a forced fault changes what a correct agent
can achieve (with no dedup and no lookup the right end state is ``unknown``), so the checker's
generic rules decide, not an end state written for another schedule; the agent gets more time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.proxy.rules import FaultRule
from harness.scenario import AgentRestart, DestinationRestart, Scenario

PER_INTENT_SECONDS = 30.0  # extra agent time per intent in an explored scenario


@dataclass(frozen=True)
class Schedule:
    faults: tuple[FaultRule, ...] = ()
    restart_agent: AgentRestart | None = None
    restart_destinations: DestinationRestart | None = None
    # destination name -> DestinationSpec fields to override (e.g. {"lookup_lag_seconds": 2.0})
    destination_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "faults": [rule.model_dump(mode="json", exclude_defaults=True) for rule in self.faults],
            "restart_agent": self.restart_agent.model_dump(mode="json") if self.restart_agent else None,
            "restart_destinations": (self.restart_destinations.model_dump(mode="json")
                                     if self.restart_destinations else None),
            "destination_options": {name: dict(options) for name, options in self.destination_options.items()
                                    if options},
        }

    def key(self) -> str:
        """Equal schedules have equal keys (Hypothesis may draw one schedule from several choice sequences)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @property
    def size(self) -> int:
        """How many things this schedule does to a run (0: the scenario without faults)."""
        return (len(self.faults) + (self.restart_agent is not None) + (self.restart_destinations is not None)
                + sum(len(options) for options in self.destination_options.values()))

    def apply(self, base: Scenario, *, name: str | None = None, description: str | None = None) -> Scenario:
        """The base scenario under this schedule, validated like any scenario file."""
        data = base.model_dump(mode="json", exclude={"source"})
        data.update(self.to_dict())
        del data["destination_options"]
        for destination, options in self.destination_options.items():
            data["destinations"][destination].update(options)
        data["expect"] = {}  # the generic rules decide (module docstring)
        # a correct agent may need longer under a forced fault (waiting out a lag, a Retry-After, a hold, on
        # each attempt of each intent): time enough that a timeout means the agent, not the schedule
        data["agent_timeout_seconds"] = min(600.0, base.agent_timeout_seconds + PER_INTENT_SECONDS * len(base.intents))
        if name is not None:
            data["name"] = name
        if description is not None:
            data["description"] = description
        return Scenario.model_validate(data)

    def summary(self) -> list[str]:
        """One line per thing the schedule does, for a person."""
        lines = [describe_fault(rule) for rule in self.faults]
        for destination, options in self.destination_options.items():
            for option, value in options.items():
                if option == "failures":
                    lines += [f"{destination} itself: {describe_failure(f)}" for f in value]
                else:
                    lines.append(f"{destination}: {option} = {value:g}")
        if self.restart_agent is not None:
            lines.append(f"the agent is killed (SIGKILL) once {_effects(self.restart_agent.after_effects)} "
                         "committed, then started again")
        if self.restart_destinations is not None:
            lines.append(f"the destinations are killed once {_effects(self.restart_destinations.after_effects)} "
                         "committed, then started again")
        return lines or ["no fault"]


def describe_fault(rule: FaultRule) -> str:
    match = rule.match
    params = [f"{name} {value}" for name, value in rule.model_dump(
        exclude_defaults=True, exclude={"id", "match", "action"}).items()]
    what = rule.action + (f" ({', '.join(params)})" if params else "")
    where = " ".join(p for p in (match.method, match.path) if p) or "any request"
    if match.destination:
        where += f" to {match.destination}"
    counted = "per idempotency key" if match.per == "idempotency_key" else \
        "per body fingerprint" if match.per == "fingerprint" else ""
    if match.nth is not None:
        which = f"matching request {match.nth}"
    elif match.first is not None:
        which = f"the first {match.first} matching requests"
    elif match.every is not None:
        which = f"every {match.every}th matching request"
    else:
        which = "every matching request"
    return f"{what} on {where}, {which}{' ' + counted if counted else ''}"


def describe_failure(failure: Mapping[str, Any]) -> str:
    extra = f" {failure['status']}" if failure.get("status") else ""
    return f"{failure['fault']}{extra} on its side-effecting request {failure['at']}"


def _effects(n: int) -> str:
    return "1 effect is" if n == 1 else f"{n} effects are"
