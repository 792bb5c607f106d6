"""One agent side: every agent-side implementation takes "may have acted", the resolution and the key from
harness.model.agent, and decides alike on the same history.

The property test builds one generated history (attempts with each dispatch state and status, lookups,
reads after write and status polls, with and without index lag) as each implementation keeps it:
harness.instrument's AttemptRecord/ObservationRecord in an Operation, the traced framework scope's and the
MCP framework scope's model records, and the OpenTelemetry example's; each must resolve it as the model
does, and say the same of every attempt and of the effect refs. The example tests hold each branch of
``decide_resolution``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import NoOpTracer

from harness.agents.frameworks.mcp_tools import McpOperation
from harness.agents.frameworks.traced import TracedOperation
from harness.agents.otel.traced import Agent as OtelAgent
from harness.agents.reference import Agent as ReferenceAgent
from harness.instrument import AttemptRecord, Instrumentation, ObservationRecord, Operation
from harness.model.agent import (
    Attempt,
    Observation,
    closing_resolution,
    decide_resolution,
    derive_key,
    may_have_acted,
    observations_since_last_attempt,
    retry_reason_after,
    succeeded,
)
from tests.instrument.loopback import CONTRACT, INTENT, harness_env

STATUSES = (200, 201, 202, 204, 301, 400, 401, 403, 404, 408, 409, 422, 425, 429, 500, 502, 503)
REFS = ("r1", "r2", "r3")
MCP_CONTRACT: dict[str, Any] = {**CONTRACT, "transport": "mcp", "idempotency": {"style": "none"}}


# -- one history, generated --------------------------------------------------------------------------------

@st.composite
def attempts(draw: st.DrawFn, *, tool_errors: bool) -> dict[str, Any]:
    state = draw(st.sampled_from(("not_sent", "sent_no_response", "response_received", "execution_error")))
    step: dict[str, Any] = {"type": "attempt", "dispatch_state": state, "http_status": None, "tool_error": False,
                            "effect_refs": []}
    if state == "response_received":
        if tool_errors and draw(st.booleans()):  # an MCP error result: the tool answered 200 with isError
            step.update(http_status=200, tool_error=True)
        else:
            step["http_status"] = draw(st.sampled_from(STATUSES))
            if 200 <= step["http_status"] < 300 and draw(st.booleans()):
                step["effect_refs"] = [draw(st.sampled_from(REFS))]
    return step


@st.composite
def observations(draw: st.DrawFn) -> dict[str, Any]:
    source = draw(st.sampled_from(("lookup", "lookup", "read_after_write", "status_poll")))
    found = draw(st.sampled_from((True, False, None)))
    refs = sorted(draw(st.sets(st.sampled_from(REFS), min_size=1, max_size=2))) if found else []
    lag_possible = draw(st.sampled_from((True, False))) if found is False and source != "status_poll" else None
    status = None
    if source == "status_poll" and found is not None:
        status = "succeeded" if found else draw(st.sampled_from(("failed", "pending")))
        refs = refs[:1]
    return {"type": "observation", "source": source, "found": found, "effect_refs": refs,
            "lag_possible": lag_possible, "status": status}


def histories(*, tool_errors: bool = False) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(st.one_of(attempts(tool_errors=tool_errors), observations()), max_size=7)


def model_records(history: list[dict[str, Any]]) -> list[Attempt | Observation]:
    records: list[Attempt | Observation] = []
    for n, step in enumerate(history):
        if step["type"] == "attempt":
            records.append(Attempt(f"att_{n}", step["dispatch_state"], step["http_status"], step["tool_error"],
                                   list(step["effect_refs"])))
        else:
            records.append(Observation(f"obs_{n}", step["source"], step["found"], list(step["effect_refs"]),
                                       step["lag_possible"], step["status"]))
    return records


# -- each implementation, holding that history --------------------------------------------------------------

class Capture:
    """A recorder that keeps what it is told (the resolution, and a duplicate's correction operation)."""

    session_id = "ses_parity"

    def __init__(self) -> None:
        self.resolutions: list[dict[str, Any]] = []
        self.operations: list[dict[str, Any]] = []

    def operation(self, operation_id: str, **fields: Any) -> None:
        self.operations.append({"operation_id": operation_id, **fields})

    def resolution(self, operation_id: str, state: str, **fields: Any) -> None:
        self.resolutions.append({"state": state, **fields})


@pytest.fixture(scope="module")
def instrumentation() -> Iterator[Instrumentation]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Instrumentation(env=harness_env(Path(tmp), "http://127.0.0.1:9"))


_intents = count()


def instrument_operation(inst: Instrumentation, history: list[dict[str, Any]]) -> tuple[Operation, Capture]:
    inst.state.clear()  # each example its own operation (the state file is rewritten on every save)
    op = inst.operation({**INTENT, "intent_id": f"parity-{next(_intents)}"})
    for n, step in enumerate(history):
        if step["type"] == "attempt":
            op.records.append(AttemptRecord(f"att_{n}", float(n), "POST", "/tickets", op.idempotency_key, None,
                                            None, n + 1, 0, dispatch_state=step["dispatch_state"],
                                            http_status=step["http_status"], effect_refs=list(step["effect_refs"])))
        else:
            op.records.append(ObservationRecord(f"obs_{n}", float(n), step["source"], step["found"],
                                                list(step["effect_refs"]), step["lag_possible"], step["status"]))
    capture = Capture()
    op.inst.recorder = capture  # type: ignore[assignment]
    return op, capture


def traced_operation(history: list[dict[str, Any]]) -> TracedOperation:
    op = TracedOperation(NoOpTracer(), INTENT, CONTRACT, "ses_parity")
    op.history = model_records(history)
    return op


def mcp_operation(history: list[dict[str, Any]]) -> tuple[McpOperation, Capture]:
    capture = Capture()
    op = McpOperation(capture, INTENT, MCP_CONTRACT, "http://127.0.0.1:9", 3)  # type: ignore[arg-type]
    op.history = model_records(history)
    return op, capture


class Span:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        self.events.append((name, attributes))


def otel_resolution(history: list[dict[str, Any]]) -> dict[str, Any]:
    agent = OtelAgent.__new__(OtelAgent)  # no intents file: only the resolution is exercised
    agent.tracer = NoOpTracer()
    span = Span()
    agent.op = {"id": "op_otel", "span": span, "history": model_records(history),
                "intent": INTENT, "attempts": []}
    agent.resolve()
    [(name, event)] = span.events
    assert name == "harness.resolution"
    return {"state": event["harness.state"], "effect_refs": event["harness.effect_refs"],
            "evidence": event["harness.evidence"], "reason": event["harness.reason"]}


def as_dict(resolution: tuple[Any, ...]) -> dict[str, Any]:
    state, refs, evidence, reason = resolution
    return {"state": state, "effect_refs": refs, "evidence": evidence, "reason": reason}


def logged(capture: Capture) -> dict[str, Any] | None:
    if not capture.resolutions:
        return None
    [resolution] = capture.resolutions
    return {"state": resolution["state"], "effect_refs": resolution.get("effect_refs") or [],
            "evidence": resolution["evidence"], "reason": resolution["reason"]}


# -- the property ----------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_every_implementation_decides_alike_on_one_http_history(instrumentation: Instrumentation,
                                                                history: list[dict[str, Any]]) -> None:
    model = model_records(history)
    expected = decide_resolution(model)
    closing = as_dict(closing_resolution(model))
    op, inst_log = instrument_operation(instrumentation, history)
    traced = traced_operation(history)
    mcp, mcp_log = mcp_operation(history)

    # may have acted, and succeeded, attempt by attempt
    mine = [r for r in op.records if isinstance(r, AttemptRecord)]
    for record, theirs_traced, theirs_mcp in zip(mine, traced.attempts, mcp.attempts, strict=True):
        acted = may_have_acted(record.dispatch_state, record.http_status)
        assert record.uncertain == theirs_traced.uncertain == theirs_mcp.uncertain == acted
        assert record.succeeded == theirs_traced.succeeded == succeeded(record.dispatch_state, record.http_status)

    # the effect refs each scope reports to the tool
    assert op.effect_refs == traced.effect_refs == mcp.effect_refs == expected.effect_refs

    # the resolution each writes
    op._auto_resolve(None)
    if expected.state is None:
        assert logged(inst_log) is None  # instrument logs none: nothing to resolve on
    else:
        assert logged(inst_log) == as_dict(expected) == closing
    assert {k.removeprefix("harness."): v for k, v in traced.resolution().items()} == closing
    mcp.resolve()
    if history:
        assert logged(mcp_log) == closing
    else:
        assert logged(mcp_log) is None  # a scope that did nothing writes nothing
    assert otel_resolution(history) == closing

    # a duplicate opens its correction, as a new operation (the OTel example's is a span)
    if expected.state == "duplicate_effect_confirmed":
        assert inst_log.resolutions[0]["correction_operation_id"] == inst_log.operations[-1]["operation_id"]
        assert mcp_log.resolutions[0]["correction_operation_id"] == mcp_log.operations[-1]["operation_id"]


@settings(max_examples=200, deadline=None)
@given(history=histories(tool_errors=True))
def test_the_mcp_scope_decides_tool_errors_as_the_model(history: list[dict[str, Any]]) -> None:
    """An error result may follow a commit: uncertain, never a success, never a refusal."""
    model = model_records(history)
    mcp, capture = mcp_operation(history)
    for attempt in mcp.attempts:
        assert attempt.uncertain == may_have_acted(attempt.dispatch_state, attempt.http_status,
                                                   tool_error=attempt.tool_error)
        if attempt.tool_error:
            assert attempt.uncertain and not attempt.succeeded
            assert retry_reason_after(attempt.dispatch_state, attempt.http_status, tool_error=True) == \
                "destination_5xx"
    mcp.resolve()
    if history:
        assert logged(capture) == as_dict(closing_resolution(model))
    last = mcp.last_attempt
    if last is not None and last.tool_error and not any(o.found for o in observations_since_last_attempt(model)):
        assert decide_resolution(model).state in ("unknown", "failed")  # never a success on an error result


@given(operation_id=st.text(min_size=1, max_size=40))
def test_every_agent_derives_the_key_alike(operation_id: str) -> None:
    key = derive_key(operation_id)
    assert key.startswith("idem_") and len(key) == 5 + 24
    reference = ReferenceAgent.__new__(ReferenceAgent)
    reference.contracts = {"tickets": CONTRACT}
    op = {"operation_id": operation_id, "kind": {"method": "POST"}, "intent": {"destination": "tickets"}}
    assert reference.idempotency_key(op, "att_any") == key


def test_every_scope_carries_its_operations_key(instrumentation: Instrumentation) -> None:
    op, _ = instrument_operation(instrumentation, [])
    traced = traced_operation([])
    mcp, _ = mcp_operation([])
    for scope in (op, traced, mcp):
        assert scope.idempotency_key == derive_key(scope.operation_id)
    assert len({op.idempotency_key, traced.idempotency_key, mcp.idempotency_key}) == 3  # one per operation


# -- decide_resolution, branch by branch ----------------------------------------------------------------------

def att(n: int, state: str, status: int | None = None, refs: tuple[str, ...] = (), *,
        tool_error: bool = False) -> Attempt:
    return Attempt(f"att_{n}", state, status, tool_error, list(refs))


def obs(n: int, found: bool | None, refs: tuple[str, ...] = (), *, source: str = "lookup",
        lag_possible: bool | None = None, status: str | None = None) -> Observation:
    return Observation(f"obs_{n}", source, found, list(refs), lag_possible, status)


def decided(*history: Attempt | Observation) -> tuple[str | None, list[str], list[str]]:
    state, refs, evidence, _ = decide_resolution(history)
    return state, refs, evidence


def test_nothing_is_nothing_to_resolve() -> None:
    assert decided() == (None, [], [])
    assert decided(obs(1, False, lag_possible=False)) == (None, [], [])
    assert closing_resolution([obs(1, None)])[:3] == ("unknown", [], ["obs_1"])


def test_an_observation_alone_that_found_the_effect() -> None:
    assert decided(obs(1, True, ("r1",))) == ("succeeded", ["r1"], ["obs_1"])


def test_a_2xx_is_success_and_a_202_is_not() -> None:
    assert decided(att(1, "response_received", 201, ("r1",))) == ("succeeded", ["r1"], ["att_1"])
    assert decided(att(1, "response_received", 202))[0] == "unknown"


def test_a_lookup_after_a_lost_answer_finds_the_effect() -> None:
    assert decided(att(1, "sent_no_response"), obs(2, False, lag_possible=True), obs(3, True, ("r1",))) == \
        ("succeeded", ["r1"], ["obs_3"])


def test_a_lookup_before_the_last_attempt_is_not_its_evidence() -> None:
    assert decided(obs(1, True, ("r1",)), att(2, "sent_no_response"))[0] == "unknown"


def test_a_read_after_write_that_finds_a_second_record_is_a_duplicate() -> None:
    assert decided(att(1, "response_received", 201, ("r2",)), obs(2, True, ("r1", "r2"), source="read_after_write")) \
        == ("duplicate_effect_confirmed", ["r1", "r2"], ["obs_2"])


def test_a_status_poll_of_an_accepted_operation() -> None:
    accepted = att(1, "response_received", 202)
    assert decided(accepted, obs(2, True, ("r1",), source="status_poll", status="succeeded")) == \
        ("succeeded", ["r1"], ["att_1", "obs_2"])
    assert decided(accepted, obs(2, False, source="status_poll", status="failed")) == \
        ("failed", [], ["att_1", "obs_2"])
    assert decided(accepted, obs(2, False, source="status_poll", status="pending"))[0] == "unknown"


def test_a_refusal_proves_nothing_was_done_unless_an_earlier_attempt_may_have_acted() -> None:
    assert decided(att(1, "response_received", 422)) == ("failed", [], ["att_1"])
    assert decided(att(1, "sent_no_response"), att(2, "response_received", 422))[0] == "unknown"


@pytest.mark.parametrize("status", [408, 409, 425])
def test_an_answer_that_leaves_the_first_request_running_is_not_a_refusal(status: int) -> None:
    assert decided(att(1, "response_received", status))[0] == "unknown"


def test_nothing_sent_or_rate_limited_is_failed() -> None:
    assert decided(att(1, "not_sent"), att(2, "not_sent")) == ("failed", [], ["att_1", "att_2"])
    resolution = decide_resolution([att(1, "response_received", 429)])
    assert resolution[:3] == ("failed", [], ["att_1"]) and resolution.reason == "no attempt was done by the destination"


def test_absence_is_proven_only_by_a_lookup_without_lag_after_the_last_uncertain_attempt() -> None:
    lost = att(1, "sent_no_response")
    assert decided(lost, obs(2, False, lag_possible=True))[0] == "unknown"
    assert decided(lost, obs(2, False, lag_possible=False)) == ("failed", [], ["obs_2"])
    assert decided(lost, obs(2, False, lag_possible=False), att(3, "response_received", 422)) == \
        ("failed", [], ["att_3", "obs_2"])
    assert decided(lost, obs(2, False, lag_possible=False), att(3, "sent_no_response"))[0] == "unknown"
    assert decided(lost, obs(2, False, source="read_after_write", lag_possible=False))[0] == "unknown"


def test_an_error_result_may_follow_a_commit() -> None:
    error = att(1, "response_received", 200, tool_error=True)
    resolution = decide_resolution([error])
    assert resolution.state == "unknown" and "error result" in resolution.reason
    assert decided(error, obs(2, False, lag_possible=False)) == ("failed", [], ["obs_2"])
    assert decided(error, obs(2, True, ("r1",))) == ("succeeded", ["r1"], ["obs_2"])


def test_unknown_cites_everything() -> None:
    assert decided(att(1, "sent_no_response"), obs(2, None), att(3, "response_received", 500)) == \
        ("unknown", [], ["att_1", "obs_2", "att_3"])


@pytest.mark.parametrize("state, status, tool_error, reason", [
    ("not_sent", None, False, "connection_not_established"),
    ("sent_no_response", None, False, "response_lost_after_dispatch"),
    ("execution_error", None, False, "response_lost_after_dispatch"),
    ("response_received", 503, False, "destination_5xx"),
    ("response_received", 200, True, "destination_5xx"),
    ("response_received", 429, False, "rate_limited"),
    ("response_received", 409, False, "response_lost_after_dispatch"),
    ("response_received", 401, False, "credential_refreshed"),
    ("response_received", 202, False, None),
    ("response_received", 201, False, None),
    ("response_received", 422, False, None),
])
def test_the_retry_reason_after_each_outcome(state: str, status: int | None, tool_error: bool,
                                             reason: str | None) -> None:
    assert retry_reason_after(state, status, tool_error=tool_error) == reason
