"""The spine's proof that the fault is real, against the project's own tickets destination and its SQLite ledger."""

from __future__ import annotations

import pytest
import requests

fake = pytest.importorskip("fake_destinations.host")
from fake_destinations.ledger import read_effects, read_requests  # noqa: E402

TICKET = {"title": "disk full", "project": "ops", "client_reference": "op_1"}


@pytest.fixture
def tickets(tmp_path):
    host = fake.DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite").start()
    try:
        yield host, tmp_path / "ledger.sqlite"
    finally:
        host.stop()


def test_ledger_holds_the_effect_the_client_never_saw(proxy_host, tickets, tmp_path):
    host, ledger = tickets
    journal = tmp_path / "journal.ndjson"
    routes = proxy_host.configure(host.urls, [{"id": "lose_first_create", "action": "drop_response_after_commit",
                                               "match": {"destination": "tickets", "method": "POST",
                                                         "path": "/tickets", "nth": 1}}], journal)
    try:
        with pytest.raises(requests.ConnectionError):
            requests.post(routes.urls["tickets"] + "/tickets", json=TICKET,
                          headers={"Idempotency-Key": "op_1"}, timeout=5)
        retry = requests.post(routes.urls["tickets"] + "/tickets", json=TICKET,
                              headers={"Idempotency-Key": "op_1"}, timeout=5)
    finally:
        proxy_host.finish()
    from harness.journal import read_journal

    lost, replayed = read_journal(journal)
    effects = read_effects(ledger)
    assert len(effects) == 1 and effects[0]["flow_id"] == lost["flow_id"]
    assert (lost["forwarded"], lost["upstream_status"], lost["client_outcome"]) == (True, 201, "connection_closed")
    # The same key replays the first answer: still one effect, and the agent finally sees its ref.
    assert retry.ok and replayed["client_status"] == retry.status_code
    assert [r["flow_id"] for r in read_requests(ledger)] == [lost["flow_id"], replayed["flow_id"]]
