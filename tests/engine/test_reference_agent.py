"""The reference agent's own decisions, called directly (its end-to-end behaviour is the catalogue)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agents.reference import Agent, Outcome
from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, STATE_DIR_ENV


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    intents = tmp_path / "intents.json"
    intents.write_text(json.dumps({"intents": [], "destinations": {}}))
    (tmp_path / "state").mkdir()
    return Agent({INTENTS_ENV: str(intents), AUDIT_LOG_ENV: str(tmp_path / "agent.ndjson"),
                  STATE_DIR_ENV: str(tmp_path / "state")})


def spend_budget(agent: Agent, fates: list[tuple[str, str]]) -> str:
    """Give the operation one attempt per (dispatch state, retry reason); the state it was resolved with."""
    op = {"operation_id": "op_1", "attempts": [], "observations": []}
    for number, (dispatch, reason) in enumerate(fates, start=1):
        op["attempts"].append(f"att_{number}")
        agent.retry_if_budget(op, reason, Outcome(f"att_{number}", dispatch))
    return op["resolved"]


def test_a_refused_last_attempt_after_a_lost_response_stays_unknown(agent: Agent) -> None:
    """Attempt 1's response was lost (the destination may hold the effect), then two connections were
    refused: the budget is spent, and nothing proves attempt 1 did not act. Not `failed` (H006)."""
    fates = [("sent_no_response", "response_lost_after_dispatch"), ("not_sent", "connection_not_established"),
             ("not_sent", "connection_not_established")]
    assert spend_budget(agent, fates) == "unknown"


def test_attempts_that_never_left_are_failed(agent: Agent) -> None:
    fates = [("not_sent", "connection_not_established")] * 2 + [("response_received", "rate_limited")]
    assert spend_budget(agent, fates) == "failed"
