"""A team's own service as a destination, on a real Docker engine: the sample orders service's image behind the
real fault proxy, its effects read by its ledger probe, judged with the same verdicts as the fake `api: orders`
destination over the orders fault scenarios, for the reference agent, the wrong agents that fail them and the
HTTP-client connectors; readiness, probe failures and cleanup.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from certification.matrix import load_expected
from harness.engine import run_scenario
from harness.errors import HarnessError
from harness.scenario import load
from tests.containers.conftest import require_engine
from tests.containers.sample import (
    CERTIFICATION_SCENARIOS,
    HTTP_LEDGER,
    ORDERS_FAULTS,
    POSTGRES_LEDGER,
    SQL_LEDGER,
    sample_image,
    sample_postgres_images,
    twins,
    verdict_of,
)

REFERENCE = f"{sys.executable} -m harness.agents.reference"


def wrong(name: str) -> str:
    return f"{sys.executable} -m harness.agents.wrong.{name}"


@pytest.fixture(scope="module")
def image() -> str:
    require_engine()
    return sample_image()


def run(path: Path, agent: str, tmp_path: Path) -> Any:
    return run_scenario(load(path), agent=agent, evidence_root=tmp_path / "evidence")


def certify(fault: str, agent: str, image: str, tmp_path: Path, *, agent_log: str | None = None,
            ledger: dict[str, Any] | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The orders scenario of ``fault`` with the fake and with the sample service: the same verdict."""
    fake, container = twins(CERTIFICATION_SCENARIOS / f"orders_{fault}.yaml", image, tmp_path,
                            agent_log=agent_log, ledger=ledger, options=options)
    by_fake, by_service = run(fake, agent, tmp_path), run(container, agent, tmp_path)
    assert verdict_of(by_service) == verdict_of(by_fake), (
        f"orders_{fault} with {agent}: the sample service's verdict {verdict_of(by_service)} is not the fake's "
        f"{verdict_of(by_fake)}\nfake: {by_fake.evidence_dir}\nservice: {by_service.evidence_dir}")
    ledger_rows = json.loads((by_service.evidence_dir / "ledger.json").read_text())
    # the harness does not see inside a team's service: the reads it forwarded are rows (no effect), writes none
    assert {(r["method"], r["outcome"], r["effect_ref"]) for r in ledger_rows["requests"]} <= {("GET", "read", None)}
    fake_effects = json.loads((by_fake.evidence_dir / "ledger.json").read_text())["effects"]
    assert len(ledger_rows["effects"]) == len(fake_effects)
    assert all(e["flow_id"] for e in ledger_rows["effects"]), "every effect's flow found in the journal"
    return by_fake, by_service


# -- the same verdicts as the fake ---------------------------------------------------------------------------

# events mode (the agent writes its audit log): the reference agent passes all four; each wrong agent here fails
# the faults listed on the fake (found by running every agent of harness/agents/wrong/ on the four: the others
# pass them), and must fail them on the team's service with the same codes
LOST, ERROR, LIMITED, LATE = ORDERS_FAULTS
CAUGHT = {
    "answer_logged_as_lost": (ERROR,), "attempt_id_as_key": ORDERS_FAULTS, "blind_backoff": (LIMITED,),
    "closure_without_evidence": (LOST, ERROR, LATE), "forger": ORDERS_FAULTS, "fresh_key_after_5xx": (ERROR,),
    "idle": ORDERS_FAULTS, "invented_state": (LOST, LATE), "lookup_as_attempt": (LOST, ERROR, LATE),
    "lookup_by_intent_id": (LOST, ERROR, LATE), "lost_response_as_not_sent": (LOST, LATE),
    "new_key_per_attempt": ORDERS_FAULTS, "resolution_before_observation": (LOST, ERROR, LATE),
    "retry_after_unread": (LIMITED,), "secret_in_log": ORDERS_FAULTS, "silent": ORDERS_FAULTS,
    "status_misreported": (ERROR,), "timeout_as_failed": ORDERS_FAULTS, "unlinked_retry": (LIMITED,),
    "unlogged_retry": (LOST, LATE),
}
EVENT_CELLS = [("reference", fault) for fault in ORDERS_FAULTS] + [
    (agent, fault) for agent, faults in CAUGHT.items() for fault in faults]


@pytest.mark.parametrize("agent, fault", EVENT_CELLS, ids=[f"{a}-{f}" for a, f in EVENT_CELLS])
def test_an_agent_with_a_log_gets_the_fakes_verdict_on_the_teams_service(agent: str, fault: str, image: str,
                                                                         tmp_path: Path) -> None:
    by_fake, by_service = certify(fault, REFERENCE if agent == "reference" else wrong(agent), image, tmp_path,
                                  agent_log="events")
    assert by_service.passed == (agent == "reference"), (by_fake.verdict.findings, by_fake.evidence_dir)


CONNECTORS = {name: c for name, c in load_expected().items() if c.api == "orders"}
BLACK_BOX_CELLS = [("reference", fault) for fault in ORDERS_FAULTS] + [
    (name, fault) for name in CONNECTORS for fault in ORDERS_FAULTS]


@pytest.mark.parametrize("agent, fault", BLACK_BOX_CELLS, ids=[f"{a}-{f}" for a, f in BLACK_BOX_CELLS])
def test_a_program_without_a_log_gets_the_fakes_verdict_on_the_teams_service(agent: str, fault: str, image: str,
                                                                             tmp_path: Path) -> None:
    """The certification scenarios as they are (black-box: the wire and the ledger alone), for the reference agent
    and every HTTP-client connector certified against the orders profile."""
    # a connector in the environment of its certified release (a TypeScript one needs its Node and npm prefix)
    command = REFERENCE if agent == "reference" else CONNECTORS[agent].ready().command
    _, by_service = certify(fault, command, image, tmp_path)
    if agent != "reference" and fault != "server_error_after_commit":  # that one's fault is the proxy's here
        want = CONNECTORS[agent].cells[fault]
        assert verdict_of(by_service) == (want.verdict == "pass", tuple(sorted(want.codes))), (
            f"{agent} on orders_{fault}: certification/expected.yaml says {want.said()}")


def test_a_sql_probe_in_the_service_container_gives_the_same_verdicts(image: str, tmp_path: Path) -> None:
    for fault in ("response_lost", "timeout_late_success"):
        for agent in (REFERENCE, wrong("new_key_per_attempt")):
            certify(fault, agent, image, tmp_path, agent_log="events", ledger=SQL_LEDGER)


def test_a_postgres_service_read_by_a_query_in_its_database_container_gives_the_same_verdicts(
        tmp_path: Path) -> None:
    """The sample's PostgreSQL variant: its state in a database container (Debian's PostgreSQL on our base) on the
    run's network under the alias db, never published; the probe runs psql there."""
    require_engine()
    service_image, database_image = sample_postgres_images()
    database = {"database": {"image": database_image, "alias": "db"}}
    for fault in ("response_lost", "timeout_late_success"):
        for agent in (REFERENCE, wrong("new_key_per_attempt")):
            _, by_service = certify(fault, agent, service_image, tmp_path, agent_log="events", ledger=POSTGRES_LEDGER,
                                    options=database)
    assert (by_service.evidence_dir / "service.orders.database.log").read_text()  # its output, kept


def test_the_flows_inferred_are_the_ones_the_service_saw(image: str, tmp_path: Path) -> None:
    """The sample keeps the X-Harness-Flow header of each order in its log; the ledger's flow ids, inferred from
    the journal (the probe is not told that field), are those."""
    _, by_service = certify("timeout_late_success", wrong("new_key_per_attempt"), image, tmp_path,
                            agent_log="events")
    seen = dict(re.findall(r"committed (ord_\d+) key=\S+ flow=(\S+)",
                           (by_service.evidence_dir / "service.orders.log").read_text()))
    effects = json.loads((by_service.evidence_dir / "ledger.json").read_text())["effects"]
    assert len(seen) == 2 and {e["effect_ref"]: e["flow_id"] for e in effects} == seen


def scenario_file(tmp_path: Path, destination: dict[str, Any], **extra: Any) -> Path:
    data = {"name": "team_service", "description": "the sample service behind the proxy",
            "destinations": {"orders": {"api": "orders", **destination}},
            "intents": [{"intent_id": "order-1", "kind": "create_order", "destination": "orders",
                         "params": {"item": "book", "quantity": 1}}], **extra}
    path = tmp_path / "team_service.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def service(image: str, **options: Any) -> dict[str, Any]:
    return {"image": image, "port": 8080, "health": {"path": "/healthz"}, "ledger": HTTP_LEDGER, **options}


def test_a_restarted_service_comes_back_on_its_port_with_its_state(image: str, tmp_path: Path) -> None:
    """destination_restart with the team's service: the container is killed after the first commit and started
    again (same host port, its database on its disk): the agent reconciles and ends with one order."""
    faults = [{"id": "lose_first", "match": {"destination": "orders", "method": "POST", "path": "/orders", "nth": 1},
               "action": "hold_response", "hold_ms": 300, "then": "drop"}]
    path = scenario_file(tmp_path, service(image), faults=faults, restart_destinations={"after_effects": 1},
                         expect={"states": {"order-1": "succeeded"}, "effects": {"orders": 1}})
    result = run(path, REFERENCE, tmp_path)
    assert result.passed, (result.verdict.findings, result.incomplete, result.evidence_dir)
    context = json.loads((result.evidence_dir / "context.json").read_text())
    probe = context["ledger_probes"]["orders"]
    assert len(context["destination_restarts"]) == 1 and len(probe["restart_seconds"]) == 1
    assert probe["probe"]["effects"] == 1


def test_a_team_service_beside_a_fake_shares_the_runs_ledger(image: str, tmp_path: Path) -> None:
    path = scenario_file(tmp_path, service(image), faults=[
        {"id": "lose", "match": {"destination": "orders", "method": "POST", "path": "/orders", "nth": 1},
         "action": "drop_response_after_commit"}])
    data = yaml.safe_load(path.read_text())
    data["destinations"]["tickets"] = {"service": "tickets"}
    data["intents"].append({"intent_id": "ticket-1", "kind": "create_ticket", "destination": "tickets",
                            "params": {"title": "t", "project": "OPS"}})
    data["expect"] = {"effects": {"orders": 1, "tickets": 1}}
    path.write_text(yaml.safe_dump(data))
    result = run(path, REFERENCE, tmp_path)
    assert result.passed, (result.verdict.findings, result.evidence_dir)
    ledger = json.loads((result.evidence_dir / "ledger.json").read_text())
    assert sorted(e["destination"] for e in ledger["effects"]) == ["orders", "tickets"]
    # the fake's requests; of the service's only the reads (the reference agent's lookup after the lost answer)
    assert {(r["destination"], r["outcome"]) for r in ledger["requests"] if r["destination"] == "orders"} == {
        ("orders", "read")}


# -- readiness -----------------------------------------------------------------------------------------------

def test_a_service_that_never_gets_ready_is_a_clear_error(image: str, tmp_path: Path) -> None:
    path = scenario_file(tmp_path, service(image, health={"path": "/ready", "timeout_seconds": 2}))
    with pytest.raises(HarnessError) as caught:
        run(path, REFERENCE, tmp_path)
    message = str(caught.value)
    assert re.search(rf"destination orders: image {re.escape(image)} did not answer 2xx on GET "
                     r"http://127\.0\.0\.1:\d+/ready within 2 s \(health\.timeout_seconds\); last: answered 404; "
                     r"the container is running; its log \(tail\):\n  sample-orders listening on 0\.0\.0\.0:8080",
                     message), message
    assert "evidence so far: " in message


def test_a_service_that_exits_before_it_is_ready_says_so_at_once(image: str, tmp_path: Path) -> None:
    command = ["python3", "-c", "import sys; print('cannot open /data/orders.db'); sys.exit(3)"]
    path = scenario_file(tmp_path, service(image, command=command, health={"path": "/healthz", "timeout_seconds": 60}))
    with pytest.raises(HarnessError, match=r"(?s)the container of image .* exited with status 3 before GET "
                                           r"http://127\.0\.0\.1:\d+/healthz answered 2xx.*cannot open "
                                           r"/data/orders.db"):
        run(path, REFERENCE, tmp_path)


def test_an_image_not_built_is_a_clear_error(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, service("sample-orders:never-built"))
    with pytest.raises(HarnessError, match=r"image sample-orders:never-built is not present in the Docker engine .* "
                                           r"build it .* or load it .*the harness never pulls"):
        run(path, REFERENCE, tmp_path)


def test_a_probe_that_does_not_work_on_the_ready_service_stops_the_run(image: str, tmp_path: Path) -> None:
    ledger = {**HTTP_LEDGER, "http": {"path": "/effects", "rows": "items"}}
    with pytest.raises(HarnessError, match=r"destination orders: the ledger probe does not work on the ready "
                                           r"service: GET http://127\.0\.0\.1:\d+/effects answered 404: .*no route"):
        run(scenario_file(tmp_path, service(image, ledger=ledger)), REFERENCE, tmp_path)


# -- a probe that fails at the end: INCOMPLETE, never a PASS --------------------------------------------------

BROKEN_PROBES = {
    "a declared field the rows lack": (
        {"ledger": {**HTTP_LEDGER, "fields": {**HTTP_LEDGER["fields"], "operation_key": "key"}}},
        r"row 1: no field 'key' \(ledger\.fields\.operation_key\)"),
    "params that are no JSON": (
        {"ledger": {"sql": {**SQL_LEDGER["sql"], "query": "SELECT id, 'not json' AS params FROM orders"},
                    "fields": {"effect_ref": "id", "params": "params"}}},
        r"params is a string that is no JSON object: 'not json'"),
    "a service gone when its effects are listed": (
        {"env": {"ORDERS_CRASH_AFTER_COMMITS": "1"}},
        r"GET http://127\.0\.0\.1:\d+/_effects failed: .* \(its container is exited, exit status 3; its log ends: .*"
        r"crashing after commit 1"),
}


@pytest.mark.parametrize("case", BROKEN_PROBES)
def test_a_probe_that_fails_at_the_end_makes_the_run_incomplete(case: str, image: str, tmp_path: Path) -> None:
    options, said = BROKEN_PROBES[case]
    path = scenario_file(tmp_path, service(image, **options))
    result = run(path, REFERENCE, tmp_path)
    assert not result.passed and result.verdict.findings == []  # nothing judged
    (gap,) = result.incomplete
    assert re.search(r"^effect ledger: destination orders \(a container service\): the ledger probe's last listing "
                     r"failed: destination orders: ledger probe.*" + said, gap), gap
    assert gap.endswith("what it committed is not known, so nothing was judged")
    assert "INCOMPLETE" in (result.evidence_dir / "verdict.txt").read_text()
    checked = subprocess.run([sys.executable, "-m", "harness", "check", str(result.evidence_dir)],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 3 and "INCOMPLETE" in checked.stdout + checked.stderr, checked
