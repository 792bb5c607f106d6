"""harness.contract: the names outside code depends on, the one mangling rule, the typed contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import contract
from harness.contract import (
    ContractError,
    DestinationContract,
    EvidenceLayout,
    IdempotencyContract,
    LookupContract,
    OperationContract,
    agent_env,
    check_destination_env,
    destination_env_name,
    env_suffix,
    fill_template,
    secret_env_name,
    template_fields,
)


@pytest.mark.parametrize("name, suffix", [
    ("tickets", "TICKETS"),
    ("my-api", "MY_API"),
    ("my_api", "MY_API"),
    ("My.Api", "MY_API"),
    ("v2", "V2"),
    ("a b", "A_B"),
    ("straße", "STRA_E"),  # one character in, one out: no Unicode case mapping (ß -> SS)
    ("café", "CAF_"),
    ("ﬁle", "_LE"),
])
def test_env_suffix_upper_cases_ascii_and_turns_every_other_character_into_one_underscore(name, suffix):
    assert env_suffix(name) == suffix


def test_destination_and_secret_variables():
    assert destination_env_name("my-api") == "HARNESS_DESTINATION_MY_API"
    assert secret_env_name("my-api") == "HARNESS_SECRET_MY_API"


def test_agent_env_names_the_files_of_the_layout_and_one_url_and_secret_per_destination(tmp_path):
    layout = EvidenceLayout(tmp_path)
    env = agent_env(layout, {"tickets": "http://127.0.0.1:1"}, {"tickets": "hsk_x"})
    assert env == {
        "HARNESS_INTENTS": str(tmp_path / "intents.json"),
        "HARNESS_AUDIT_LOG": str(tmp_path / "agent.ndjson"),
        "HARNESS_TRACE_FILE": str(tmp_path / "agent.trace.jsonl"),
        "HARNESS_STATE_DIR": str(tmp_path / "agent-state"),
        "HARNESS_DESTINATION_TICKETS": "http://127.0.0.1:1",
        "HARNESS_SECRET_TICKETS": "hsk_x",
    }


def test_the_evidence_layout():
    layout = EvidenceLayout(Path("/run"))
    assert {name: str(getattr(layout, name)) for name in (
        "agent_log", "journal", "ledger_dump", "ledger_db", "context", "intents", "verdict_json",
        "verdict_text", "agent_stdout", "agent_stderr", "state_dir")} == {
        "agent_log": "/run/agent.ndjson", "journal": "/run/journal.ndjson", "ledger_dump": "/run/ledger.json",
        "ledger_db": "/run/ledger.sqlite", "context": "/run/context.json", "intents": "/run/intents.json",
        "verdict_json": "/run/verdict.json", "verdict_text": "/run/verdict.txt",
        "agent_stdout": "/run/agent.stdout", "agent_stderr": "/run/agent.stderr", "state_dir": "/run/agent-state"}


def test_wire_names():
    assert (contract.FLOW_HEADER, contract.IDEMPOTENCY_HEADER, contract.REPLAYED_HEADER, contract.ACCOUNT_HEADER,
            contract.CLIENT_TOKEN_FIELD, contract.CLIENT_REFERENCE_FIELD) == (
        "X-Harness-Flow", "Idempotency-Key", "Idempotent-Replayed", "X-Account", "client_token", "client_reference")


def test_a_partial_contract_reads_with_defaults_and_ignores_unknown_keys():
    parsed = DestinationContract.from_dict({
        "service": "webhook", "future_key": 1,
        "idempotency": {"style": "none", "header": None, "scope": None},
        "lookup": {"path": "/hooks", "query_param": "ref"},
        "operations": {"notify": {"method": "POST", "path": "/hooks"}}})
    assert parsed.idempotency == IdempotencyContract(style="none", scope="global")
    assert parsed.lookup == LookupContract(path="/hooks", query_param="ref")
    assert parsed.lookup.lag_seconds is None and not parsed.lookup.may_lag
    assert parsed.operations["notify"] == OperationContract(method="POST", path="/hooks")
    assert parsed.status is None and not parsed.deduplicates("notify")


def test_dedup_comes_from_the_destination_or_from_the_operation_kind():
    marker = DestinationContract("ssh", operations={"deploy": OperationContract("EXEC", command="deploy",
                                                                                  dedup="operation_marker")})
    assert marker.deduplicates("deploy") and not marker.deduplicates("other") and not marker.deduplicates(None)
    assert DestinationContract("tickets", IdempotencyContract(style="stripe")).deduplicates(None)


def test_a_lag_of_zero_is_no_lag():
    assert not LookupContract("/t", "ref", lag_seconds=0.0).may_lag
    assert LookupContract("/t", "ref", lag_seconds=0.5).may_lag


@pytest.mark.parametrize("bad, message", [
    ([], "expected an object, got list"),
    ({}, "service: required key is missing"),
    ({"service": "t", "lookup": "yes"}, "lookup: expected dict, got str 'yes'"),
    ({"service": "t", "lookup": {"path": "/t"}}, "lookup.query_param: required key is missing"),
    ({"service": "t", "lookup": {"path": "/t", "query_param": "r", "lag_seconds": True}},
     "lookup.lag_seconds: expected seconds (a number), got bool True"),
    ({"service": "t", "idempotency": {"retention_seconds": "1d"}}, "idempotency.retention_seconds: expected seconds"),
    ({"service": "t", "operations": {"x": 1}}, "operations.x: expected an object, got int"),
    ({"service": "t", "operations": {"x": {"path": "/x"}}}, "operations.x.method: required key is missing"),
])
def test_a_malformed_contract_names_the_key(bad, message):
    with pytest.raises(ContractError) as caught:
        DestinationContract.from_dict(bad)
    assert message in str(caught.value)


def test_the_module_imports_only_the_standard_library():
    """The reference agent and the destination process import it: no pydantic, no harness modules."""
    code = ("import sys; before = set(sys.modules); import harness.contract; "
            "new = sorted(m for m in set(sys.modules) - before if m.startswith(('harness.', 'pydantic', 'yaml')) "
            "and m != 'harness.contract'); print(new)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("template, fields, filled", [
    ("plain", [], "plain"),
    ("{a}", ["a"], "<a>"),
    ("x{a}y{b.c}z", ["a", "b.c"], "x<a>y<b.c>z"),
    ("{{a}}", [], "{a}"),
    ("{{{a}}}", ["a"], "{<a>}"),
    ("}}{{", [], "}{"),
    ("{}", [""], "<>"),
])
def test_a_braced_template_is_read_once_for_every_filler(template: str, fields: list[str], filled: str) -> None:
    assert template_fields(template) == fields
    assert fill_template(template, lambda name: f"<{name}>") == filled


@pytest.mark.parametrize("template, where", [("{a", 1), ("a}", 2), ("{a{b}}", 1), ("x{{y}", 5)])
def test_a_lone_brace_is_an_error_naming_where(template: str, where: int) -> None:
    with pytest.raises(ValueError, match=f"a lone '[{{}}]' at character {where}: write"):
        template_fields(template)


def test_a_destination_env_template_names_the_unknown_placeholder_and_the_valid_ones() -> None:
    assert check_destination_env("{url}/v1?k={secret}") == "{url}/v1?k={secret}"
    with pytest.raises(ValueError) as caught:
        check_destination_env("{url}/{path}")
    assert str(caught.value) == ("unknown placeholder {path}; valid: {url}, {origin}, {host}, {port}, {name}, "
                                 "{secret} ({{ and }} for literal braces)")
    with pytest.raises(ValueError, match="NUL"):
        check_destination_env("a\0")
