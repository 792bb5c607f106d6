"""docs/contract.md stays true where a machine can tell: the names, the event format, the examples,
the figures it quotes, the catalogue table, and the minimal agent it prints (run against scenarios)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from harness import contract
from harness.agent_process import KILL_GRACE_SECONDS
from harness.agents import reference
from harness.audit.lines import load_log
from harness.checker import check
from harness.contract import (
    AUDIT_LOG_ENV,
    DESTINATION_ENV_PREFIX,
    EVENT_NAMES,
    INTENTS_ENV,
    SECRET_ENV_PREFIX,
    STATE_DIR_ENV,
    DestinationContract,
    EvidenceLayout,
    agent_env,
    env_suffix,
)
from harness.events import RETRY_REASONS, json_schema, parse_line, validate_event
from harness.fingerprint import fingerprint
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import Scenario, load

REPO = Path(__file__).resolve().parents[2]
DOC_PATH = REPO / "docs" / "contract.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
SCENARIOS = sorted(catalogue_dir().glob("*.yaml"))
COMMON_FIELDS = ("event", "ts", "session_id", "operation_id", "seq", "prev_hash", "hash")


def flat(text: str) -> str:
    """The text with every run of white space made one space (the doc wraps its lines anywhere)."""
    return re.sub(r"\s+", " ", text)


def section(title: str) -> str:
    """From a heading whose text starts with ``title`` to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(title)}.*$", DOC, re.M)
    assert match, f"docs/contract.md has no heading {title!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(DOC, match.end())
    return DOC[match.end():end.start() if end else len(DOC)]


def blocks(marker: str) -> list[str]:
    """The fenced code blocks that follow an ``<!-- marker`` comment."""
    found = re.findall(rf"<!-- {re.escape(marker)}\b[^\n]*-->\n```\w*\n(.*?)\n```", DOC, re.S)
    assert found, f"docs/contract.md has no code block marked {marker!r}"
    return found


def tables(text: str) -> list[list[list[str]]]:
    """The tables of ``text``: each a list of rows (the header first, the separator row left out) of cells."""
    found: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def table_rows(text: str, header: str | None = None) -> list[list[str]]:
    """The body rows of every table in ``text`` (of those whose first header cell is ``header``)."""
    return [row for table in tables(text) if header is None or table[0][0] == header for row in table[1:]]


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def scenarios() -> list[Scenario]:
    return [load(path) for path in SCENARIOS]


# -- names ----------------------------------------------------------------------------------------

CONTRACT_ENV_NAMES = sorted(value for name, value in vars(contract).items()  # the bare prefix names no variable
                            if name.isupper() and isinstance(value, str) and value.startswith("HARNESS_")
                            and value != contract.HARNESS_ENV_PREFIX)


def test_every_harness_variable_of_the_code_is_in_the_doc() -> None:
    assert {"HARNESS_INTENTS", "HARNESS_AUDIT_LOG", "HARNESS_STATE_DIR"} <= set(CONTRACT_ENV_NAMES)
    for value in CONTRACT_ENV_NAMES:
        shown = value + "<NAME>" if value.endswith("_") else value
        assert f"`{shown}`" in DOC, f"docs/contract.md does not name {shown}"
    given = agent_env(EvidenceLayout(Path("/evidence")), {"tickets": "http://127.0.0.1:1"}, {"tickets": "s3cret"})
    for name in given:
        assert name in DOC or name.startswith((DESTINATION_ENV_PREFIX, SECRET_ENV_PREFIX)), name


def test_every_harness_variable_in_the_doc_exists_in_the_code() -> None:
    prefixes = [v for v in CONTRACT_ENV_NAMES if v.endswith("_")]
    names = {env_suffix(name) for scenario in scenarios() for name in scenario.destinations}
    for token in set(re.findall(r"HARNESS_[A-Z0-9_]*\*?", DOC)):
        if token in CONTRACT_ENV_NAMES or token == "HARNESS_*":  # the glob: all of them
            continue
        prefix = next((p for p in prefixes if token.startswith(p)), None)
        assert prefix is not None, f"docs/contract.md names {token}, which harness/contract.py does not define"
        suffix = token[len(prefix):]
        assert suffix in names, f"{token}: no destination of the catalogue gives the suffix {suffix!r}"


def test_the_doc_paths_are_the_ones_the_agent_gets() -> None:
    env = agent_env(EvidenceLayout(Path("/abs/evidence")), {}, {})
    assert all(Path(env[name]).is_absolute() for name in (INTENTS_ENV, AUDIT_LOG_ENV, STATE_DIR_ENV))
    assert f"`{contract.STATE_DIR_NAME}` in the evidence folder" in DOC


def test_the_wire_names_are_the_code_s() -> None:
    for name in (contract.IDEMPOTENCY_HEADER, contract.REPLAYED_HEADER, contract.ACCOUNT_HEADER,
                 contract.TRACEPARENT_HEADER, contract.TRACEPARENT_ENV, contract.CLIENT_TOKEN_FIELD,
                 contract.CLIENT_REFERENCE_FIELD, contract.LOOKUP_RESULT_FIELD):
        assert f"`{name}" in DOC, name
    assert f"`{contract.RECEIPT_PREFIX} <ref>`" in DOC
    assert contract.FLOW_HEADER not in DOC  # the agent never sees it and needs nothing of it


def test_every_evidence_file_the_doc_names_exists() -> None:
    files = {value for name, value in vars(contract).items() if name.endswith("_FILE") and isinstance(value, str)}
    named = set(re.findall(r"`([\w.-]+\.(?:json|ndjson|stdout|stderr|txt|sqlite|key))`", DOC))
    assert named and named <= files, named - files


# -- the audit event format -----------------------------------------------------------------------

def event_schemas() -> dict[str, dict[str, Any]]:
    return {d["properties"]["event"]["const"]: d for d in json_schema()["$defs"].values()}


def field_table(text: str) -> dict[str, str]:
    """field -> its "required" cell, from the tables of ``text`` whose header is field | required | ..."""
    out: dict[str, str] = {}
    for table in tables(text):
        if table[0][:2] == ["field", "required"]:
            for cells in table[1:]:
                for name in ticked(cells[0]):
                    out[name] = cells[1]
    return out


def test_every_event_type_has_a_section_with_every_field_of_the_schema() -> None:
    schemas = event_schemas()
    assert set(schemas) == set(EVENT_NAMES)
    common = field_table(section("5. The audit log").split("###")[0])
    for event, schema in schemas.items():
        rows = {**common, **field_table(section(f"`{event}`"))}
        for name in schema["properties"]:
            assert name in rows, f"docs/contract.md: field {name!r} of {event} events is not described"
            required = name in schema["required"]
            assert (rows[name] == "yes") == required, (
                f"docs/contract.md says {name!r} of {event} events is required: {rows[name]!r}; "
                f"the schema says {'required' if required else 'optional'}")
    assert set(common) == set(COMMON_FIELDS)


def test_every_enumerated_value_of_the_schema_is_in_the_doc() -> None:
    for schema in event_schemas().values():
        for prop in schema["properties"].values():
            for value in prop.get("enum", []):
                assert f"`{value}`" in DOC, value
    for event in EVENT_NAMES:
        assert f"### `{event}`" in DOC


def test_the_retry_reasons_table_is_the_closed_vocabulary() -> None:
    rows = [ticked(cells[0]) for cells in table_rows(section("7. Retries"), header="`retry_reason`")]
    assert rows == [[reason] for reason in RETRY_REASONS]


def test_the_dispatch_states_table_is_the_schema_s() -> None:
    enum = event_schemas()["attempt"]["properties"]["dispatch_state"]["enum"]
    rows = [ticked(cells[0]) for cells in table_rows(section("`attempt`"), header="`dispatch_state`")]
    assert rows == [[state] for state in enum]


def test_the_fingerprint_is_as_documented() -> None:
    for value in ({"b": 1, "a": ["é", None]}, ["deploy", "r42", "--operation-id", "op_1"], {}):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert fingerprint(value) == "sha256:" + __import__("hashlib").sha256(text.encode()).hexdigest()
    assert 'json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)' in DOC


@pytest.mark.parametrize("index", range(len(blocks("example-log"))))
def test_the_example_logs_validate_and_audit_healthy(index: int, tmp_path: Path) -> None:
    text = blocks("example-log")[index]
    for number, line in enumerate(text.splitlines(), 1):
        record, error = parse_line(line)
        assert error is None, f"example log {index + 1}, line {number}: {error}"
        assert validate_event(record)[1] is None
    path = tmp_path / "example.ndjson"
    path.write_text(text + "\n", encoding="utf-8")
    verdict = check(load_log(path), offline=True)
    assert verdict.passed, [f.message for f in verdict.findings]
    assert {op.classification for op in verdict.operations} == {"healthy"}


# -- the intents file -----------------------------------------------------------------------------

def test_the_example_intents_file_is_what_the_harness_writes_for_response_lost() -> None:
    (text,) = blocks("example-intents")
    shown = json.loads(text)
    scenario = load(catalogue_dir() / "response_lost.yaml")
    written = {"intents": [intent.model_dump() for intent in scenario.intents],  # as harness.engine writes it
               "destinations": {name: c.to_dict() for name, c in scenario.contracts().items()}}
    assert shown == written
    for name, data in shown["destinations"].items():
        assert DestinationContract.from_dict(data).to_dict() == data, name


def test_the_reference_agent_reads_the_example_intents_file(tmp_path: Path) -> None:
    (text,) = blocks("example-intents")
    (tmp_path / "intents.json").write_text(text, encoding="utf-8")
    (tmp_path / "state").mkdir()
    agent = reference.Agent({INTENTS_ENV: str(tmp_path / "intents.json"), AUDIT_LOG_ENV: str(tmp_path / "log"),
                             STATE_DIR_ENV: str(tmp_path / "state")})
    agent.recorder.close()
    assert [i["intent_id"] for i in agent.intents] == ["printer-on-fire"]
    assert set(agent.contracts) == {"tickets"}
    intent = agent.intents[0]
    assert intent["kind"] in agent.contracts[intent["destination"]]["operations"]


def test_every_intent_key_and_contract_key_is_described() -> None:
    (text,) = blocks("example-intents")
    intent_keys = set(json.loads(text)["intents"][0])
    assert intent_keys == set(Scenario.model_fields["intents"].annotation.__args__[0].model_fields)  # type: ignore[union-attr]
    described = section("3. The intents file").split("```", 2)[2]
    for key in intent_keys:
        assert f"`{key}`" in described, key
    full = DestinationContract.from_dict({
        "service": "x", "idempotency": {"account_header": "X-Account"}, "lookup": {"path": "/", "query_param": "q",
                                                                                   "lag_seconds": 1},
        "operations": {"k": {"method": "POST", "path": "/", "command": "c", "dedup": "d",
                             "client_reference_field": "r", "effect_ref_field": "e", "body_defaults": {}}},
        "status": {"path": "/s"}}).to_dict()
    keys = set(full) | {f"idempotency.{k}" for k in full["idempotency"]} | {f"lookup.{k}" for k in full["lookup"]}
    keys |= set(full["operations"]["k"])
    table = flat(described)
    from fake_destinations.services import SERVICES

    service_row = next(cells[1] for cells in table_rows(described, header="key") if cells[0] == "`service`")
    assert [name for name in ticked(service_row) if name in SERVICES] == list(SERVICES)
    for key in keys:
        assert f"`{key}`" in table or f"`{key}." in table or f"`{key.split('.')[-1]}`" in table, key


# -- figures quoted from the code -----------------------------------------------------------------

def test_the_timeouts_and_budgets_quoted_are_the_code_s() -> None:
    text = flat(DOC)
    assert (f"connects within {reference.CONNECT_TIMEOUT:.1f} s and waits {reference.READ_TIMEOUT:.1f} s"
            in text)
    assert f"(the reference agent: {reference.Agent.max_attempts} attempts)" in text
    assert f"the reference agent's is {reference.Agent.max_attempts}" in text
    assert f"caps them at {reference.MAX_RETRY_AFTER:g} s" in text
    assert f"about {sum(reference.ASYNC_POLL_WAITS):g} s in all" in text
    assert f"about {round(sum(reference.UNANSWERED_WAITS)):g} s in all" in text
    assert f"then SIGKILL {KILL_GRACE_SECONDS:g} s later" in text
    field = Scenario.model_fields["agent_timeout_seconds"]
    assert f"(default {field.default:g} s" in text and f"{field.default:g} s by default" in text
    assert f"at most {600}" in text and any(getattr(m, "le", None) == 600 for m in field.metadata)
    assert all(s.agent_timeout_seconds == field.default for s in scenarios()), "no bundled scenario changes it"


def test_the_holds_quoted_are_the_scenarios_and_a_timeout_is_exercised() -> None:
    text = flat(section("11. Timeouts"))
    holds = {}
    for scenario in scenarios():
        for fault in scenario.faults:
            if fault.action == "hold_response":
                holds[scenario.name] = fault.hold_ms / 1000  # type: ignore[operator]
    assert holds
    for name, seconds in holds.items():
        at = text.find(f"`{name}`")
        assert at >= 0, f"section 11 does not name {name}, whose fault holds the answer {seconds:g} s"
        assert f"{seconds:g} s" in text[at:at + 80], (name, seconds)
    assert reference.READ_TIMEOUT < max(holds.values())
    assert f"under {max(holds.values()):g} s" in text


# -- the catalogue table --------------------------------------------------------------------------

def test_the_catalogue_table_holds_every_scenario_and_its_expectations() -> None:
    rows = {ticked(cells[0])[0]: " | ".join(cells[1:]) for cells in table_rows(section("12. The catalogue"),
                                                                                header="scenario")}
    loaded = scenarios()
    assert sorted(rows) == sorted(s.name for s in loaded)
    for scenario in loaded:
        row = rows[scenario.name]
        for intent_id, states in scenario.expect.allowed_states().items():
            assert f"`{intent_id}` {' or '.join(states)}" in row, (scenario.name, intent_id, states)
        for destination, counts in scenario.expect.allowed_effects().items():
            assert f"{destination} {' or '.join(map(str, counts))}" in row, (scenario.name, destination, counts)


# -- SSH, as the doc tells it ---------------------------------------------------------------------

def test_the_ssh_host_behaves_as_documented(tmp_path: Path) -> None:
    import asyncssh

    from fake_destinations import DestinationHost
    from fake_destinations.ledger import read_requests

    operation_id = "op_55088b7cce0c"
    command = f"deploy r42 --operation-id {operation_id}"

    async def run(url: str) -> asyncssh.SSHCompletedProcess | str:
        host, port = url.removeprefix("ssh://").split(":")
        try:
            async with asyncssh.connect(host, int(port), username="anyone", known_hosts=None, client_keys=None,
                                        agent_path=None) as conn:
                return await conn.run(command)
        except (OSError, asyncssh.Error) as exc:
            return type(exc).__name__

    spec = {"web1": {"service": "ssh", "failures": [{"at": 1, "fault": "drop_after_exec"}]}}
    with DestinationHost(spec, tmp_path / "ledger.sqlite") as host:
        url = host.urls["web1"]
        assert url.startswith("ssh://127.0.0.1:")
        dropped = asyncio.run(run(url))
        rerun = asyncio.run(run(url))
        rows = read_requests(host.ledger_path)
    assert isinstance(dropped, str) or dropped.exit_status is None  # no exit status ever arrives
    assert not isinstance(rerun, str) and rerun.exit_status == 0
    out = str(rerun.stdout)
    assert f"operation {operation_id} already applied (r42); nothing to do" in out
    assert "operation <op id> already applied (<release>); nothing to do" in flat(DOC)
    receipt = f"effect_ref: deploy:{operation_id}"
    assert receipt in out.splitlines() and f"`{receipt}`" in DOC
    assert [r["outcome"] for r in rows] == ["committed", "replayed"]
    for row in rows:  # what the checker matches SSH attempts by: key = operation id, fingerprint of the words
        assert (row["method"], row["path"], row["idempotency_key"]) == ("EXEC", command, operation_id)
        assert row["payload_fingerprint"] == fingerprint(shlex.split(command))


# -- links ----------------------------------------------------------------------------------------

def test_the_readme_and_the_architecture_link_the_doc() -> None:
    assert "(docs/contract.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "(contract.md)" in (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


# -- the minimal agent ----------------------------------------------------------------------------

MINIMAL_AGENT_SCENARIOS = ("response_lost", "response_lost_key_replay", "response_lost_no_dedup_no_lookup",
                           "crash_after_dispatch", "reconciliation_duplicate", "ssh_chain_dropped",
                           "ssh_append_dropped", "two_intents_one_run")


@pytest.fixture(scope="module")
def minimal_agent(tmp_path_factory: pytest.TempPathFactory) -> str:
    (text,) = blocks("minimal-agent")
    path = tmp_path_factory.mktemp("agent") / "agent.py"
    path.write_text(text + "\n", encoding="utf-8")
    compile(text, str(path), "exec")
    assert "harness" not in re.findall(r"^\s*(?:from|import) (\w+)", text, re.M), "written from the doc alone"
    return f"python {shlex.quote(str(path))}"


@pytest.mark.parametrize("name", MINIMAL_AGENT_SCENARIOS)
def test_the_minimal_agent_of_the_doc_passes(name: str, minimal_agent: str, tmp_path: Path) -> None:
    from harness.engine import run_scenario

    result = run_scenario(load(catalogue_dir() / f"{name}.yaml"), agent=minimal_agent, evidence_root=tmp_path)
    assert result.passed, render_result(result)
