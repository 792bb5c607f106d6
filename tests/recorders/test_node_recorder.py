"""The Node recorder (recorders/node) writes what the Python recorder writes: its own `node --test` suite passes,
its lines fit the published JSON Schema, its hash chain verifies with harness.chain, its types name the schema's
values, and the offline checker judges its logs (a right agent's healthy, a wrong agent's caught)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from harness import chain, contract
from harness.model.operation import RETRY_REASONS
from harness.resources import AUDIT_EVENT_SCHEMA_FILE, schema_file
from tests.common.node import node

PACKAGE = Path(__file__).resolve().parents[2] / "recorders" / "node"
SCHEMA = json.loads(schema_file(AUDIT_EVENT_SCHEMA_FILE).read_text(encoding="utf-8"))

# a Node agent's log through the recorder: one operation whose answer was lost, a lookup that found the ticket,
# strings and numbers that JavaScript and Python write differently unless the recorder takes care
RIGHT = """
import { Recorder, fingerprint } from "RECORDER";
const r = new Recorder(process.argv.at(-1), { chain: true });
const body = { title: "Printer on fire \\u2028 é", project: "OPS", amount: 0.00001, big: 1e21 };
r.operation("op_1", { intent_id: "printer-on-fire", idempotency_key: "key_1",
  intent: { kind: "create_ticket", destination: "tickets", params: body }, payload_fingerprint: fingerprint(body) });
r.attempt("op_1", "att_1", "sent_no_response", { attempt_number: 1, idempotency_key: "key_1",
  request_fingerprint: fingerprint(body), attempt_budget_remaining: 2, error: "TimeoutError" });
r.observation("op_1", "obs_1", { source: "lookup", found: true, effect_refs: ["tkt_0001"] });
r.resolution("op_1", "succeeded", { effect_refs: ["tkt_0001"], evidence: ["obs_1"] });
r.close();
"""
# the usual mistake: the retry after a lost answer mints a new idempotency key
WRONG = """
import { Recorder } from "RECORDER";
const r = new Recorder(process.argv.at(-1));
r.operation("op_1", { intent_id: "printer-on-fire", idempotency_key: "key_1" });
r.attempt("op_1", "att_1", "sent_no_response", { attempt_number: 1, idempotency_key: "key_1" });
r.attempt("op_1", "att_2", "response_received", { attempt_number: 2, idempotency_key: "key_2", http_status: 201,
  retry_of_attempt_id: "att_1", retry_reason: "response_lost_after_dispatch", effect_refs: ["tkt_0002"] });
r.resolution("op_1", "succeeded", { effect_refs: ["tkt_0002"], evidence: ["att_2"] });
r.close();
"""


def write_log(tmp_path: Path, script: str, name: str) -> Path:
    log = tmp_path / f"{name}.ndjson"
    source = script.replace("RECORDER", (PACKAGE / "index.js").as_uri())
    subprocess.run([node(), "--input-type=module", "-e", source, str(log)], check=True, timeout=60)
    return log


def audit(log: Path) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "harness", "audit", str(log), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(done.stdout)


def test_the_recorders_own_node_test_suite_passes() -> None:
    done = subprocess.run([node(), "--test"], cwd=PACKAGE, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^ℹ pass [1-9]", done.stdout, flags=re.M) and re.search(r"^ℹ fail 0$", done.stdout, flags=re.M)


def test_every_line_fits_the_published_schema_and_the_chain_verifies(tmp_path: Path) -> None:
    log = write_log(tmp_path, RIGHT, "right")
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").split("\n") if line]
    assert [e["event"] for e in events] == ["operation", "attempt", "observation", "resolution"]
    for event in events:
        jsonschema.Draft202012Validator(SCHEMA).validate(event)
    intact, message = chain.verify_file(log)
    assert intact, message
    assert message.startswith("chain intact: 4 events")


def test_the_checker_passes_a_right_agents_log_and_catches_a_wrong_ones(tmp_path: Path) -> None:
    status, report = audit(write_log(tmp_path, RIGHT, "right"))
    assert status == 0, report
    assert [op["classification"] for op in report["operations"]] == ["healthy"]
    status, report = audit(write_log(tmp_path, WRONG, "wrong"))
    assert status == 1, report
    [operation] = report["operations"]
    assert "H002" in {f["code"] for f in operation["findings"]}, operation


def test_a_line_edited_after_the_node_recorder_wrote_it_breaks_the_chain(tmp_path: Path) -> None:
    log = write_log(tmp_path, RIGHT, "right")
    log.write_text(log.read_text(encoding="utf-8").replace('"found":true', '"found":false'), encoding="utf-8")
    intact, message = chain.verify_file(log)
    assert not intact and message.startswith("line 3: hash does not match"), message


def test_the_recorders_names_are_the_contracts() -> None:
    source = f'import * as r from "{(PACKAGE / "index.js").as_uri()}"; console.log(JSON.stringify(' \
             '{AUDIT_LOG_ENV: r.AUDIT_LOG_ENV, EVENT_NAMES: r.EVENT_NAMES, GENESIS: r.GENESIS}))'
    done = subprocess.run([node(), "--input-type=module", "-e", source], capture_output=True, text=True,
                          check=True, timeout=60)
    assert json.loads(done.stdout) == {"AUDIT_LOG_ENV": contract.AUDIT_LOG_ENV,
                                       "EVENT_NAMES": list(contract.EVENT_NAMES), "GENESIS": chain.GENESIS}


def union(name: str) -> list[str]:
    """The string literals of one `export type NAME = ...;` of the recorder's index.d.ts."""
    text = (PACKAGE / "index.d.ts").read_text(encoding="utf-8")
    found = re.search(rf"export type {name} =(.*?);", text, flags=re.S)
    assert found, name
    return re.findall(r'"([a-z0-9_]+)"', found[1])


def enum(event: str, field: str) -> list[str]:
    spec = SCHEMA["$defs"][event]["properties"][field]
    [values] = [s["enum"] for s in spec.get("anyOf", [spec]) if "enum" in s]
    return list(values)


@pytest.mark.parametrize(("type_name", "values"), [
    ("DispatchState", enum("AttemptEvent", "dispatch_state")),
    ("OperationState", enum("ResolutionEvent", "state")),
    ("ObservationSource", enum("ObservationEvent", "source")),
    ("RetryReason", list(RETRY_REASONS)),
])
def test_the_typescript_types_name_the_schemas_values(type_name: str, values: list[str]) -> None:
    assert union(type_name) == values
