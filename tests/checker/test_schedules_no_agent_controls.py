"""What exploration taught the checker: outcomes a schedule forces on a correct agent are not its failures.

Each story is told twice: once where the agent is right under the schedule (a planned crash, a client that
gave up before a slow answer, a network that delivered one request twice to a destination that can neither
deduplicate nor be searched), and once, with the schedule's excuse taken away, where the same log is wrong.
"""

from __future__ import annotations

import pytest

from tests.common.evidence_builder import EvidenceBuilder, codes, reference_dedup_retry_run


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence")


def crash_at(b: EvidenceBuilder, when: float) -> None:
    """The harness killed the agent at `when` and started it again (as the engine records it)."""
    b.context["agent"]["runs"] = [
        {"command": "agent", "exit_status": None, "timed_out": False, "killed_by_harness": True, "seconds": 1.0,
         "started_at": when - 1.0, "ended_at": when},
        {"command": "agent", "exit_status": 0, "timed_out": False, "killed_by_harness": False, "seconds": 1.0,
         "started_at": when, "ended_at": when + 5.0}]


def answered_but_logged_lost(b: EvidenceBuilder) -> float:
    """Attempt 1's client got a 201 on the wire, but the log says sent_no_response; a lookup closes it."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", effect="tkt_1", attempt_number=1, attempt_budget_remaining=2)
    b.observation("op_1", "obs_1", found=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["obs_1"])
    return b.journal[0]["ts_request"]


def test_an_answer_the_log_calls_lost_is_h028(b):
    answered_but_logged_lost(b)
    assert "H028" in codes(b.check())


def test_an_attempt_a_planned_crash_interrupted_may_be_logged_lost(b):
    sent = answered_but_logged_lost(b)
    crash_at(b, sent + 0.005)  # killed after the request left; the restarted run logged the attempt
    assert "H028" not in codes(b.check())


def test_a_client_that_gave_up_before_the_answer_was_sent_logged_it_lost_rightly(b):
    answered_but_logged_lost(b)
    b.journal[0]["ts_done"] = b.events[1]["ts"] + 0.01  # the proxy wrote the 201 after the agent had given up
    b.journal[0]["ts_request"] = b.journal[0]["ts_done"] - 1.6  # on its 1.5 s timeout
    assert "H028" not in codes(b.check())


def test_an_answer_sent_at_once_reached_a_client_still_waiting_whenever_the_attempt_says_it_left(b):
    """The attempt stamped when it was sent (as the contract asks) is before the answer, but the 201 went out 20 ms
    after the request: no client gives up that soon (claims.GAVE_UP_AFTER_SECONDS), so it was received."""
    answered_but_logged_lost(b)
    b.events[1]["ts"] = b.journal[0]["ts_request"] - 0.001
    assert "H028" in codes(b.check())


def phantom(b: EvidenceBuilder) -> None:
    """An attempt logged sent_no_response that never reached the wire."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", wire=False, attempt_number=1, attempt_budget_remaining=2,
              traceparent=f"00-{'a' * 32}-{'1' * 16}-01")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", attempt_number=2, retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", retry_decision="retry: dedup", attempt_budget_remaining=1,
              traceparent=f"00-{'a' * 32}-{'2' * 16}-01")  # each attempt names itself on the wire
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


def test_an_attempt_that_never_left_is_h018(b):
    phantom(b)
    assert "H018" in codes(b.check())


def test_the_attempt_a_restarted_agent_reports_for_the_one_in_flight_is_no_phantom(b):
    phantom(b)
    crash_at(b, b.events[0]["ts"] + 0.05)  # after the operation was logged, before the attempt was
    assert "H018" not in codes(b.check())


def lost_reason_for_a_502(b: EvidenceBuilder) -> float:
    """Attempt 1 got a 502 on the wire; the retry says its answer was lost."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", status=502, attempt_number=1, attempt_budget_remaining=2)
    b.journal[0].update(upstream_status=None, forwarded=True, client_status=502, client_outcome="response")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", attempt_number=2, retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", retry_decision="retry: dedup", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    return b.journal[0]["ts_request"]


def test_a_lost_reason_for_a_502_the_agent_read_is_h024(b):
    lost_reason_for_a_502(b)
    assert "H024" in codes(b.check())


def test_a_lost_reason_for_an_answer_the_killed_run_never_read_is_right(b):
    sent = lost_reason_for_a_502(b)
    crash_at(b, sent + 0.005)
    assert not {"H024", "H028"} & codes(b.check())


def two_owners_at_once(b: EvidenceBuilder) -> float:
    """The dedup-retry story, but the retry comes from another session while the first flow is still on the wire."""
    reference_dedup_retry_run(b)
    next(e for e in b.events if e.get("attempt_id") == "att_2")["session_id"] = "ses_2"
    first, second = b.journal[0], b.journal[1]
    first["ts_done"] = second["ts_done"] + 1.0  # the first flow is still on the wire when the second goes out
    return first["ts_request"]


def test_two_sessions_writing_one_operation_at_once_is_h020(b):
    two_owners_at_once(b)
    assert "H020" in codes(b.check())


def test_a_killed_owner_s_flow_is_no_second_owner(b):
    sent = two_owners_at_once(b)
    crash_at(b, sent + 0.005)
    assert "H020" not in codes(b.check())


def network_duplicate(b: EvidenceBuilder, *, retried: bool) -> None:
    """The webhook destination (no dedup, no lookup) committed two deliveries."""
    b.intent(destination="webhook", kind="notify")
    b.operation(destination="webhook", key=None)
    b.attempt("op_1", "att_1", "response_received", key=None, destination="webhook", effect="dlv_1",
              attempt_number=1, attempt_budget_remaining=2)
    if retried:  # the agent sent it again itself
        b.attempt("op_1", "att_2", "response_received", key=None, destination="webhook", effect="dlv_2",
                  attempt_number=2, retry_of_attempt_id="att_1", retry_reason="operator_requested",
                  retry_decision="retry", attempt_budget_remaining=1)
    else:  # the network delivered the one request twice: a second effect of the same flow
        b.effects.append({**b.effects[0], "seq": 2, "effect_ref": "dlv_2"})
    b.resolution("op_1", "succeeded", effects=["dlv_1"], evidence=["att_1"])


def test_a_duplicate_the_network_made_where_nothing_can_prevent_or_show_it_is_not_the_agent_s(b):
    network_duplicate(b, retried=False)
    assert "H016" not in codes(b.check())


def test_a_duplicate_the_agent_sent_is_h016(b):
    network_duplicate(b, retried=True)
    assert "H016" in codes(b.check())


def quick_retry_after_429(b: EvidenceBuilder, *, client_outcome: str) -> None:
    """A 429 asking for 1 s, and a retry 20 ms later."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received" if client_outcome == "response" else "sent_no_response",
              status=429, attempt_number=1, attempt_budget_remaining=2, retry_after_seconds=1,
              client_outcome=client_outcome)
    b.journal[0]["client_retry_after"] = "1"
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", attempt_number=2, retry_of_attempt_id="att_1",
              retry_reason="rate_limited" if client_outcome == "response" else "response_lost_after_dispatch",
              retry_decision="retry", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


def test_a_retry_that_ignores_a_received_retry_after_is_h011(b):
    quick_retry_after_429(b, client_outcome="response")
    assert "H011" in codes(b.check())


def test_a_429_whose_answer_broke_off_on_its_way_asked_the_client_nothing(b):
    quick_retry_after_429(b, client_outcome="connection_closed")
    assert "H011" not in codes(b.check())


def duplicated_then_retried(b: EvidenceBuilder, *, client_status: int) -> None:
    """The network delivered attempt 1 twice: one copy committed tkt_1, the other was answered `client_status`
    and that answer reached the client; a retry (its key expired) committed tkt_2."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", status=client_status, attempt_number=1,
              attempt_budget_remaining=2)
    first = b.requests[0]
    b.requests.append({**first, "seq": 2, "status": client_status, "outcome": "rate_limited", "effect_ref": None})
    b.journal[0].update(fault="duplicate_delivery", client_status=client_status)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_2", attempt_number=2, retry_of_attempt_id="att_1",
              retry_reason="rate_limited", retry_decision="retry", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_2"])


def test_a_duplicate_behind_an_answer_that_said_nothing_happened_is_not_the_agent_s(b):
    duplicated_then_retried(b, client_status=429)
    assert "H016" not in codes(b.check())


def test_a_retry_after_an_answer_that_said_it_was_done_is_h016(b):
    duplicated_then_retried(b, client_status=201)
    assert "H016" in codes(b.check())
