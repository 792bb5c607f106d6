"""The operation model as the checker's net (H060): flaws no named rule was written for, each story told the
right way (passes every check) and with the flaw (fails on H060 alone, the message naming the step, the state
and what the model allows there); the model's own table checked against the event schema and the docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checker import RULES
from harness.model import operation as model
from harness.report import render_text
from harness.resources import AUDIT_EVENT_SCHEMA_FILE, schema_file
from tests.common.evidence_builder import EvidenceBuilder, codes


def reexecuted_after_success(b: EvidenceBuilder, bad: bool) -> None:
    """A call that succeeded is executed again (agno#10366): the key is the same, the destination replays, so
    no duplicate is left and no named rule fires; only an operator may ask for it."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", attempt_budget_remaining=2)
    if not bad:
        b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, retry_of_attempt_id="att_1",
              retry_reason="operator_requested", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"] + ([] if bad else ["apr_1"]))


def dispatched_before_declared(b: EvidenceBuilder, bad: bool) -> None:
    """The pending operation is persisted after its first dispatch: a crash in between loses the intent."""
    b.intent()
    if not bad:
        b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", attempt_budget_remaining=2)
    if bad:
        b.operation()
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])


def final_state_rewritten(b: EvidenceBuilder, bad: bool) -> None:
    """A final resolution rewritten: history is appended, never rewritten."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect=None, status=400, attempt_budget_remaining=2)
    b.resolution("op_1", "failed", evidence=["att_1"], reason="destination refused the request: 400")
    b.resolution("op_1", "unknown" if bad else "failed", evidence=["att_1"], reason="second thoughts")


def unknown_retried_on_own_say(b: EvidenceBuilder, bad: bool) -> None:
    """An operation resolved unknown (escalated) is executed again without the operator: with the same key on a
    deduplicating destination no rule sees a duplicate, but the escalation meant nothing."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_budget_remaining=2)
    b.resolution("op_1", "unknown", evidence=["att_1"], reason="the answer was lost; escalating")
    if not bad:
        b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


STORIES = {"reexecuted_after_success": (reexecuted_after_success, "again after att_1's 201 answer showed"),
           "dispatched_before_declared": (dispatched_before_declared, "from state undeclared"),
           "final_state_rewritten": (final_state_rewritten, "rewrites its final state failed as unknown"),
           "unknown_retried_on_own_say": (unknown_retried_on_own_say, "after the operation was resolved unknown")}


@pytest.mark.parametrize("story", sorted(STORIES))
def test_the_right_story_passes(tmp_path: Path, story: str) -> None:
    b = EvidenceBuilder(tmp_path / "evidence")
    STORIES[story][0](b, False)
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


@pytest.mark.parametrize("story", sorted(STORIES))
def test_a_flaw_no_named_rule_covers_is_the_models_finding(tmp_path: Path, story: str) -> None:
    b = EvidenceBuilder(tmp_path / "evidence")
    build, said = STORIES[story]
    build(b, True)
    verdict = b.check()
    assert codes(verdict) == {"H060"}, render_text(verdict)
    finding = verdict.by_code("H060")[0]
    assert said in finding.message, finding.message
    assert finding.evidence[0]["source"] == "log" and finding.evidence[0]["line"], finding


def test_a_step_the_model_does_not_allow_names_the_state_and_what_is_allowed(tmp_path: Path) -> None:
    b = EvidenceBuilder(tmp_path / "evidence")
    dispatched_before_declared(b, True)
    message = b.check().by_code("H060")[0].message
    assert "is a 'attempt' step from state undeclared" in message
    assert "from undeclared it allows: declare, correct, supersede" in message


def test_a_named_rule_that_says_it_keeps_the_model_quiet(tmp_path: Path) -> None:
    """Failed while in doubt is H006's: the model's finding on the same line is not repeated."""
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_budget_remaining=2)
    b.resolution("op_1", "failed", evidence=["att_1"])
    found = codes(b.check())
    assert "H006" in found and "H060" not in found, found


def test_the_model_is_on_the_checkers_list_and_judges_only_with_the_wire() -> None:
    assert RULES["H060"].requires == frozenset({"wire", "events"})


def test_states_and_dispatch_states_match_the_published_schema() -> None:
    schema = json.loads(schema_file(AUDIT_EVENT_SCHEMA_FILE).read_text())
    text = json.dumps(schema)
    for state in (*model.RESOLUTION_STATES, *model.ATTEMPT_STATES["not_sent"]):
        assert f'"{state}"' in text, state
    for reason in model.RETRY_REASONS:
        assert reason in text, reason


def test_every_step_has_a_row_and_every_row_a_known_step_and_actor() -> None:
    assert {t.step for t in model.TRANSITIONS} == set(model.STEPS)
    for t in model.TRANSITIONS:
        assert set(t.sources) <= set(model.STATES) and set(t.actors) <= set(model.ACTORS), t
        assert t.target in ("=", "*", *model.STATES), t
    labels = [t.label for t in model.TRANSITIONS]
    assert len(labels) == len(set(labels)), "each row has a name of its own"


def test_docs_contract_shows_the_model_as_the_module_renders_it() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "contract.md").read_text()
    table = doc.split("<!-- operation-model:start -->\n", 1)[1].split("<!-- operation-model:end -->", 1)[0]
    assert table == model.render_markdown(), "run: python -c 'from harness.model.operation import render_markdown; " \
                                             "print(render_markdown())' and paste it into docs/contract.md"


def _raw_violations(b: EvidenceBuilder) -> list[str]:
    """What the model alone says of a story, before the named rules' word silences any of it."""
    from harness.checker.history import replay
    from harness.checker.run_context import RunContext
    from harness.evidence import load_evidence

    run = RunContext(load_evidence(b.write()))
    return [v.message for op in run.ops.values() for v in replay(op).violations]


def test_the_model_alone_never_objects_to_a_right_story_of_any_named_rule(tmp_path: Path) -> None:
    """Parity on every fixture of tests/checker/test_rules.py: each rule's story told the right way takes only
    steps the model allows (the named rules and the model agree on what is correct)."""
    from tests.checker.test_rules import STORIES as RULE_STORIES

    for code, story in sorted(RULE_STORIES.items()):
        if RULES[code].requires & {"black_box"}:
            continue  # no log: no history to replay
        b = EvidenceBuilder(tmp_path / code)
        story(b, False)
        assert _raw_violations(b) == [], code


@pytest.mark.parametrize("writes", [1, 2])
def test_black_box_checks_say_whether_the_writes_reached_them(tmp_path: Path, writes: int) -> None:
    """Judged from the wire alone, a retry check holds only when the program retried: one write leaves it not
    exercised, two exercise it."""
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.request(lost=True, effect="tkt_1")
    if writes == 2:
        b.request(effect="tkt_1", replay=True)
    verdict = b.black_box().check()
    budget = "H043 wire-retry-budget"
    assert verdict.passed, render_text(verdict)
    assert verdict.checks[budget] == ("held" if writes == 2 else "not exercised")
    [intent] = verdict.intents
    assert (budget in intent.held) == (writes == 2) and (budget in intent.not_exercised) == (writes == 1)


@pytest.mark.parametrize("status, tool_error, fits", [(500, False, True), (200, True, True), (200, False, False)])
def test_destination_5xx_is_a_5xx_or_an_mcp_error_result(status: int, tool_error: bool, fits: bool) -> None:
    """An MCP error result is the tool's 5xx (docs/contract.md section 7): a retry after it gives
    destination_5xx; after a plain 200 answer that reason still does not fit."""
    assert model.retry_reason_fits("destination_5xx", "response_received", status, False,
                                   tool_error=tool_error) is fits
    assert not model.retry_reason_fits("rate_limited", "response_received", 200, False, tool_error=True)
