"""Hypothesis strategies over fault schedules, for `python -m harness explore` and a team's own tests.

Everything is drawn from the registries, not from a list kept here: the fault actions and the values
each parameter may take (``harness.proxy.rules.ACTIONS``), the routes of each destination (its
contract: operations, lookup, status), the destination options and their bounds
(``fake_destinations.spec.EXPLORABLE_OPTIONS``) and the faults a destination produces itself
(``FAULTS_BY_TRANSPORT``). Choices are ordered simplest first, so that Hypothesis shrinks a failing
schedule to fewer faults, earlier requests and simpler actions.

    from hypothesis import given
    from harness.scenario import load
    from harness.strategies import explored_scenarios

    @given(explored_scenarios(load("scenarios/payments.yaml")))
    def test_my_agent(scenario, run_scenario): ...   # run_scenario: the plugin's fixture
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from fake_destinations.services import SERVICES
from fake_destinations.spec import EXPLORABLE_OPTIONS, FAULTS_BY_TRANSPORT, DestinationSpec, describe
from harness.contract import MCP_TRANSPORT
from harness.explore_defaults import DEFAULT_CLIENT_TIMEOUT, DEFAULT_MAX_FAULTS
from harness.proxy.rules import ACTIONS, ClientTimeouts, FaultAction, FaultRule, Match
from harness.scenario import AgentRestart, DestinationRestart, Scenario
from harness.schedule import Schedule

MAX_NTH = 4  # which matching request a rule targets: the 1st..4th (a run makes a handful)

__all__ = ["DEFAULT_CLIENT_TIMEOUT", "Schedule", "agent_restarts", "destination_options", "destination_restarts",
           "explored_scenarios", "fault_rules", "request_matches", "routes", "schedules"]


def http_destinations(scenario: Scenario) -> list[str]:
    """The destinations the fault proxy sits in front of."""
    return [name for name, spec in scenario.destinations.items() if SERVICES[spec.service].transport == "http"]


def routes(spec: DestinationSpec) -> list[tuple[str | None, str | None]]:
    """(method, path template) of every request the destination's contract names, the writes first;
    (None, None) last: any request."""
    contract = describe(spec)
    found = [(op.method, op.path) for op in contract.operations.values() if op.path]
    if contract.lookup is not None:
        found.append((contract.lookup.method, contract.lookup.path))
    if contract.status is not None:
        found.append((contract.status.method, contract.status.path))
    return [*dict.fromkeys(found), (None, None)]


def _which(per_key: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Which of the matching requests: the nth (simplest first), the first n; counted per run or per key."""
    nth = st.integers(1, MAX_NTH).map(lambda n: {"nth": n})
    first = st.integers(2, 3).map(lambda n: {"first": n})
    per_run = st.one_of(nth, first)
    if not per_key:
        return per_run
    return st.one_of(per_run, nth.map(lambda when: {**when, "per": "idempotency_key"}))


def request_matches(scenario: Scenario) -> st.SearchStrategy[Match]:
    """Which request a fault hits: destination, method and path from its contract, which of them."""
    choices = [(name, method, path) for name in http_destinations(scenario)
               for method, path in routes(scenario.destinations[name])]
    if not choices:
        return st.nothing()
    keyed = any(describe(scenario.destinations[name]).idempotency.style != "none"
                for name in http_destinations(scenario))
    return st.builds(lambda target, when: Match(destination=target[0], method=target[1], path=target[2], **when),
                     st.sampled_from(choices), _which(keyed))


def _values(action: FaultAction, parameter: str, client_timeout: float) -> tuple[Any, ...]:
    values = action.explore[parameter]
    return values.milliseconds(client_timeout) if isinstance(values, ClientTimeouts) else values


# the faults are drawn for HTTP destinations (http_destinations): never an action for MCP tool calls only, nor one
# that kills the agent's sending process (a single-process agent is not restarted: nothing would be explored)
_HTTP_ACTIONS = [action for action in ACTIONS.values() if not action.tool_call_only and not action.kills_sender]


def fault_rules(scenario: Scenario, *, client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
                rule_id: str = "explored") -> st.SearchStrategy[FaultRule]:
    """One fault rule: an action of the registry, its parameters from the action's own choices, its target."""
    destinations = http_destinations(scenario)
    if not destinations:
        return st.nothing()
    matches = request_matches(scenario)
    connection = st.sampled_from(destinations).map(lambda name: Match(destination=name))

    @st.composite
    def rule(draw: st.DrawFn) -> FaultRule:
        action = draw(st.sampled_from(_HTTP_ACTIONS))
        match = draw(connection if action.phase == "connection" else matches)
        params = {name: draw(st.sampled_from(_values(action, name, client_timeout))) for name in action.parameters}
        return FaultRule(id=rule_id, match=match, action=action.name,
                         **{k: v for k, v in params.items() if v is not None})

    return rule()


def _rarely(strategy: st.SearchStrategy[Any], nothing: Any = None) -> st.SearchStrategy[Any]:
    """`nothing` three times in four (and first, so a shrink goes there): a schedule that changes everything at
    once hides the single fault that exposes a flaw, so most draws leave each knob alone."""
    return st.one_of(st.just(nothing), st.just(nothing), st.just(nothing), strategy)


def _option_value(low: float, high: float) -> st.SearchStrategy[float | None]:
    """None (the scenario's own value) first, else a tenth of a second within the bounds."""
    return _rarely(st.integers(round(low * 10), round(high * 10)).map(lambda v: v / 10))


def _failures(transport: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    """The faults a destination produces itself (at most one per schedule: the proxy does the rest)."""
    def failure(fault: str, at: int, status: int, retry_after: int) -> dict[str, Any]:
        out: dict[str, Any] = {"at": at, "fault": fault}
        if fault == "rate_limited":
            out["retry_after_seconds"] = retry_after
        elif fault != "drop_after_exec" and transport != MCP_TRANSPORT:  # an MCP server's failure is a tool error
            out["status"] = status
        return out

    one = st.builds(failure, st.sampled_from(FAULTS_BY_TRANSPORT[transport]), st.integers(1, 3),
                    st.sampled_from((500, 503)), st.integers(0, 2))
    return _rarely(st.lists(one, min_size=1, max_size=1), nothing=[])


def destination_options(scenario: Scenario) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    """Overrides of each destination's explorable options (only those that apply to it), and its own failures."""
    per_destination = {}
    for name, spec in scenario.destinations.items():
        if spec.is_container:  # a team's own service does what it does: the proxy's faults and the crashes explore it
            continue
        fields: dict[str, st.SearchStrategy[Any]] = {option.name: _option_value(option.low, option.high)
                  for option in EXPLORABLE_OPTIONS if option.applies(spec)}
        fields["failures"] = _failures(SERVICES[spec.service].transport)
        per_destination[name] = st.fixed_dictionaries(fields).map(functools.partial(_changes, spec.model_dump()))
    return st.fixed_dictionaries(per_destination).map(lambda drawn: {k: v for k, v in drawn.items() if v})


def _changes(own: dict[str, Any], drawn: dict[str, Any]) -> dict[str, Any]:
    """The drawn options that change something: not left out, not the scenario's own value."""
    return {k: v for k, v in drawn.items() if v not in (None, []) and v != own.get(k)}


def _crash_points(scenario: Scenario) -> st.SearchStrategy[int]:
    return st.integers(1, max(1, len(scenario.intents)))


def agent_restarts(scenario: Scenario) -> st.SearchStrategy[AgentRestart | None]:
    """No crash first, else the agent killed once this many effects are committed."""
    return _rarely(_crash_points(scenario).map(lambda n: AgentRestart(after_effects=n)))


def destination_restarts(scenario: Scenario) -> st.SearchStrategy[DestinationRestart | None]:
    return _rarely(_crash_points(scenario).map(lambda n: DestinationRestart(after_effects=n)))


def schedules(scenario: Scenario, *, client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
              max_faults: int = DEFAULT_MAX_FAULTS) -> st.SearchStrategy[Schedule]:
    """Whole schedules over `scenario`: up to `max_faults` proxy faults (a lost response, then a 503 on
    the lookup, then a 429 on the retry...), crashes of the agent or the destinations, destination
    options. The empty schedule is the simplest."""
    def build(rules: list[FaultRule], agent: AgentRestart | None, destinations: DestinationRestart | None,
              options: dict[str, dict[str, Any]]) -> Schedule:
        named = tuple(rule.model_copy(update={"id": f"f{i}_{rule.action}"}) for i, rule in enumerate(rules, 1))
        return Schedule(named, agent, destinations, options)

    rules = st.lists(fault_rules(scenario, client_timeout=client_timeout), max_size=max_faults) \
        if http_destinations(scenario) else st.just([])  # SSH only: the destinations' own failures
    return st.builds(build, rules, agent_restarts(scenario), destination_restarts(scenario),
                     destination_options(scenario))


def explored_scenarios(scenario: Scenario, **kwargs: Any) -> st.SearchStrategy[Scenario]:
    """`scenario` under drawn schedules (keyword arguments: those of :func:`schedules`)."""
    return schedules(scenario, **kwargs).map(lambda schedule: schedule.apply(scenario))
