"""The reference agent's MCP decisions, called directly (its end-to-end behaviour: test_mcp_end_to_end.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agents.reference import Agent, Outcome
from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, STATE_DIR_ENV

STYLES = {"none": ("none", None), "client_token": ("client_token", "idempotency_key"),
          "natural_key": ("natural_key", "client_reference")}


def mcp_agent(tmp_path: Path, style: str, lookup: bool = True) -> Agent:
    name, field = STYLES[style]
    contract = {"service": "mcp", "transport": "mcp", "endpoint": "/mcp",
                "idempotency": {"style": name, "header": None, "body_field": field, "retention_seconds": None},
                "lookup": {"method": "tools/call", "path": "find_orders", "query_param": "client_reference",
                           "result_field": "items", "lag_seconds": 0.0} if lookup else None,
                "operations": {"create_order": {"method": "tools/call", "path": "create_order",
                                                "client_reference_field": "client_reference", "effect_ref_field": "id",
                                                "required_params": ["item"],
                                                "annotations": {"idempotentHint": True}}}}
    intents = tmp_path / "intents.json"
    intents.write_text(json.dumps({"intents": [{"intent_id": "i1", "kind": "create_order", "destination": "orders",
                                                "params": {"item": "widget"}}],
                                   "destinations": {"orders": contract}}))
    (tmp_path / "state").mkdir()
    return Agent({INTENTS_ENV: str(intents), AUDIT_LOG_ENV: str(tmp_path / "agent.ndjson"),
                  STATE_DIR_ENV: str(tmp_path / "state"), "HARNESS_DESTINATION_ORDERS": "http://127.0.0.1:9"})


@pytest.mark.parametrize("style, key_argument", [("none", None), ("client_token", "idempotency_key"),
                                                  ("natural_key", "client_reference")])
def test_one_tools_call_carries_the_key_argument_its_contract_names(tmp_path: Path, style: str,
                                                                    key_argument: str | None) -> None:
    agent = mcp_agent(tmp_path, style)
    op = agent.open_operation(agent.intents[0])
    request = agent.build_request(op, "att_1")
    assert (request["method"], request["path"], request["headers"]) == ("tools/call", "create_order", {})
    assert request["body"]["client_reference"] == op["operation_id"]
    assert request["body"]["item"] == "widget"
    if key_argument is None:
        assert request["key"] is None and "idempotency_key" not in request["body"]
    else:
        assert request["key"] and request["body"][key_argument] == request["key"]
    if style == "natural_key":
        assert request["key"] == op["operation_id"]  # one effect per client reference: the operation id


def test_a_refused_connection_is_not_sent(tmp_path: Path) -> None:
    """Port 9 (discard) refuses: the MCP session never opened, so the tools/call never left."""
    agent = mcp_agent(tmp_path, "none")
    op = agent.open_operation(agent.intents[0])
    outcome = agent.send("att_1", agent.build_request(op, "att_1"), op)
    assert outcome.dispatch_state == "not_sent" and outcome.error


def test_an_error_result_without_lookup_or_key_stays_unknown(tmp_path: Path) -> None:
    agent = mcp_agent(tmp_path, "none", lookup=False)
    op = agent.open_operation(agent.intents[0])
    op["attempts"].append("att_1")
    reason = agent.next_step(op, Outcome("att_1", "response_received", 200, None, error="boom", tool_error=True))
    assert reason is None and op["resolved"] == "unknown"


def test_an_error_result_is_retried_only_under_the_key_argument(tmp_path: Path) -> None:
    agent = mcp_agent(tmp_path, "client_token", lookup=False)
    op = agent.open_operation(agent.intents[0])
    op["attempts"].append("att_1")
    reason = agent.next_step(op, Outcome("att_1", "response_received", 200, None, error="boom", tool_error=True))
    assert reason == "destination_5xx" and op["effect_uncertain"]
