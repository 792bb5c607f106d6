"""An engine's rerun (a queue's redelivery, an activity or step retry) judged by the operation model: an attempt of
the same operation whatever its first run got to log, safe under the same key on a destination that deduplicates,
a duplicate waiting to happen under a new one. The journal's killed sender is a crash of that process."""

from __future__ import annotations

import pytest

from harness.checker.run_context import worker_kills
from harness.model import operation as model
from tests.common.evidence_builder import EvidenceBuilder, codes


@pytest.fixture
def b(tmp_path):
    return EvidenceBuilder(tmp_path / "evidence")


def worker_killed_then_redelivered(b: EvidenceBuilder, *, rerun_key: str, reason: str = "task_redelivered") -> None:
    """The worker's request committed tkt_1 and the proxy killed the worker; the redelivered run logs the dead
    run's attempt as unknown, then sends again under ``rerun_key``."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", log=False)
    b.journal[0]["process_killed"] = {"pid": 4242, "command": "celery worker", "ts": b.journal[0]["ts_done"]}
    b.attempt("op_1", "att_1", "sent_no_response", wire=False, attempt_number=1, attempt_budget_remaining=2,
              worker="celery-2", error="the worker that ran it died before logging its outcome")
    same = rerun_key == "idem-op_1"
    b.attempt("op_1", "att_2", "response_received", key=rerun_key, effect="tkt_1" if same else "tkt_2", replay=same,
              attempt_number=2, retry_of_attempt_id="att_1", retry_reason=reason, retry_decision="run again",
              attempt_budget_remaining=1, worker="celery-2")
    refs = ["tkt_1"] if same else ["tkt_2"]
    b.resolution("op_1", "succeeded", effects=refs, evidence=["att_2"])


@pytest.mark.parametrize("reason", sorted(model.ENGINE_RERUNS))
def test_a_rerun_under_the_same_key_on_a_deduplicating_destination_passes(b, reason):
    worker_killed_then_redelivered(b, rerun_key="idem-op_1", reason=reason)
    assert codes(b.check()) == set()


def test_a_rerun_that_mints_a_new_key_is_caught_before_and_by_the_second_effect(b):
    worker_killed_then_redelivered(b, rerun_key="idem-new")
    assert {"H002", "H010", "H016"} <= codes(b.check())


def test_the_engines_reasons_fit_whatever_the_first_run_logged():
    for reason in model.ENGINE_RERUNS:
        assert reason in model.RETRY_REASONS
        for state in (None, "not_sent", "sent_no_response", "response_received", "execution_error"):
            assert model.retry_reason_fits(reason, state, 201, approved=False)
    assert not model.retry_reason_fits("rate_limited", "sent_no_response", None, approved=False)


def test_the_journal_kills_are_crashes_of_the_sender():
    journal = [{"process_killed": None}, {"process_killed": {"pid": 7, "command": "w", "ts": 12.5}},
               {"process_killed": {"pid": 8, "command": "w", "ts": True}}, {}]
    assert worker_kills(journal) == (12.5,)
