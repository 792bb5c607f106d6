"""The public strategies: every schedule they draw is a valid scenario, they reach everything the
registries declare, and what they shrink to is the simplest schedule."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from fake_destinations.spec import EXPLORABLE_OPTIONS, DestinationSpec
from harness import explore as explore_module
from harness import explore_defaults
from harness import scenario as scenario_module
from harness.agents import reference
from harness.proxy.rules import ACTIONS, ClientTimeouts, FaultRule
from harness.resources import catalogue, catalogue_dir
from harness.scenario import Scenario, load, scenario_yaml
from harness.schedule import Schedule
from harness.strategies import explored_scenarios, fault_rules, routes, schedules

RESPONSE_LOST = load(catalogue_dir() / "response_lost.yaml")
QUICK = settings(max_examples=25, database=None, deadline=None, suppress_health_check=list(HealthCheck))


def _same(a: Scenario, b: Scenario) -> bool:
    return a.model_dump(exclude={"source"}) == b.model_dump(exclude={"source"})


@pytest.mark.parametrize("path", catalogue(), ids=lambda p: p.stem)
def test_every_drawn_schedule_is_a_scenario_that_round_trips_through_its_file(path: Path, tmp_path: Path) -> None:
    base = load(path)

    @QUICK
    @given(schedules(base))
    def check(schedule: Schedule) -> None:
        scenario = schedule.apply(base)
        assert scenario.expect.states == {} and scenario.expect.effects == {}  # the rules decide
        assert [i.model_dump() for i in scenario.intents] == [i.model_dump() for i in base.intents]
        file = tmp_path / "drawn.yaml"
        file.write_text(scenario_yaml(scenario), encoding="utf-8")
        assert _same(load(file), scenario)

    check()


def test_the_base_scenarios_round_trip_too(tmp_path: Path) -> None:
    for path in catalogue():
        base = load(path)
        (tmp_path / path.name).write_text(scenario_yaml(base), encoding="utf-8")
        assert _same(load(tmp_path / path.name), base), path.stem


def test_the_strategies_reach_every_action_route_and_option_the_registries_declare() -> None:
    """Built from the registries, not from a list here: a new action, route or option is drawn without a change."""
    seen_actions: set[str] = set()
    seen_routes: set[tuple[str | None, str | None]] = set()
    seen_options: set[str] = set()
    seen_crashes: set[str] = set()
    base = load(catalogue_dir() / "async_accepted.yaml")  # a write, a lookup and a status route

    @settings(max_examples=400, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(schedules(base, max_faults=3))
    def draw(schedule: Schedule) -> None:
        for rule in schedule.faults:
            seen_actions.add(rule.action)
            seen_routes.add((rule.match.method, rule.match.path))
        for options in schedule.destination_options.values():
            seen_options.update(options)
        seen_crashes.update(k for k in ("restart_agent", "restart_destinations") if getattr(schedule, k))

    draw()
    # exploration draws faults for HTTP destinations: the MCP tool call actions are not theirs; nor one that kills the
    # agent's sending process (only an engine that reruns a dead worker's work goes on after it)
    assert seen_actions == {name for name, action in ACTIONS.items()
                            if not action.tool_call_only and not action.kills_sender}
    assert "kill_sender_after_commit" not in seen_actions
    spec = base.destinations["deployments"]
    assert set(routes(spec)) <= seen_routes | {(None, None)}
    assert seen_options == {o.name for o in EXPLORABLE_OPTIONS if o.applies(spec)} | {"failures"}
    assert seen_crashes == {"restart_agent", "restart_destinations"}


def test_parameters_come_from_each_actions_own_choices() -> None:
    timeout = 2.0

    @QUICK
    @given(fault_rules(RESPONSE_LOST, client_timeout=timeout))
    def check(rule: FaultRule) -> None:
        action = ACTIONS[rule.action]
        for name in action.parameters:
            choices = action.explore[name]
            allowed = choices.milliseconds(timeout) if isinstance(choices, ClientTimeouts) else choices
            value = getattr(rule, name)
            assert value in allowed or (None in allowed and value == FaultRule.model_fields[name].default)

    check()


def test_a_status_after_commit_is_never_one_that_lies_about_the_commit() -> None:
    """replace_status answers after the destination committed: only a 5xx, which claims nothing."""
    assert all(500 <= s <= 599 for s in ACTIONS["replace_status"].explore["status"])


def test_shrinking_goes_to_the_simplest_schedule() -> None:
    assert find(schedules(RESPONSE_LOST), lambda s: True) == Schedule()
    one = find(schedules(RESPONSE_LOST), lambda s: any(r.action == "synthetic_status" for r in s.faults),
               settings=settings(database=None, max_examples=2000))
    assert len(one.faults) == 1 and one.size == 1
    rule = one.faults[0]
    # the first of each choice: the destination's first route (its write), the 1st request, the first status
    assert (rule.match.method, rule.match.path, rule.match.nth) == ("POST", "/tickets", 1)
    assert rule.status == ACTIONS["synthetic_status"].explore["status"][0]
    assert rule.retry_after is None


def test_options_stay_within_their_declared_bounds() -> None:
    bounds = {o.name: (o.low, o.high) for o in EXPLORABLE_OPTIONS}

    @QUICK
    @given(schedules(RESPONSE_LOST))
    def check(schedule: Schedule) -> None:
        for options in schedule.destination_options.values():
            for name, value in options.items():
                if name != "failures":
                    low, high = bounds[name]
                    assert low <= value <= high

    check()
    for option in EXPLORABLE_OPTIONS:  # each is a field of the spec, its bounds valid for it
        assert option.name in DestinationSpec.model_fields
        DestinationSpec.model_validate({"service": "tickets", option.name: option.high})


def test_a_team_can_use_explored_scenarios_in_its_own_given_tests() -> None:
    drawn: list[Scenario] = []

    @QUICK
    @given(explored_scenarios(RESPONSE_LOST), st.just(None))
    def check(scenario: Scenario, _: None) -> None:
        drawn.append(scenario)

    check()
    assert drawn and all(s.name == RESPONSE_LOST.name for s in drawn)


def test_defaults_kept_equal_to_what_they_mirror() -> None:
    assert explore_defaults.DEFAULT_CLIENT_TIMEOUT == reference.READ_TIMEOUT
    assert explore_module.MAX_NAME_LENGTH == scenario_module.MAX_NAME_LENGTH
