"""The ledger's rows are tamper-evident (fake_destinations.ledger, issue 30): a real destination process
writes and signs them with a key only it and the harness hold; whatever another process of the same user
does to the SQLite file (edit, delete, cut, clear, roll back, forge) is named by ``verify_ledger`` against
the writer's own account (``seal``), and nothing is said of a ledger left alone."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from fake_destinations.host import DestinationHost
from fake_destinations.ledger import DESTINATIONS_WRITER, copy_ledger, verify_ledger


@pytest.fixture
def host(tmp_path: Path) -> Iterator[DestinationHost]:
    with DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite") as started:
        yield started


def create(host: DestinationHost, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        response = requests.post(f"{host.urls['tickets']}/tickets", json={"title": f"t{i}", "project": "ops"},
                                 headers={"Idempotency-Key": f"k{i}"}, timeout=5)
        assert response.status_code == 201, response.text


def tamper(host: DestinationHost, *statements: str) -> None:
    """What an agent of the same user can do: open the live file and change it."""
    db = sqlite3.connect(host.ledger_path, isolation_level=None)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def problems(host: DestinationHost) -> list[str]:
    return host.seal_problems + verify_ledger(host.ledger_path, host.ledger_key, {DESTINATIONS_WRITER: host.seal()})


def test_a_ledger_left_alone_is_as_written(host: DestinationHost) -> None:
    create(host, 3)
    assert host.seal() == {"requests": 3, "effects": 3}
    assert problems(host) == []
    # the checker never sees the signatures: they are the ledger's defence, not evidence
    assert all("mac" not in row for row in host.effects() + host.requests())


def test_after_its_account_the_ledger_takes_nothing_until_the_next_run(host: DestinationHost) -> None:
    """What reaches the destination after the writer gave its account (a neighbour probing the port during the
    teardown, a request that arrives late) is not the run's: it lands nowhere, so the copy is held to the account
    it was given (before, such a row read as "replayed from elsewhere" and the run went unjudged), and the next
    run records again."""
    create(host, 2)
    assert host.seal() == {"requests": 2, "effects": 2}
    create(host, 1, first=2)  # answered, not recorded
    assert len(host.requests()) == 2 and problems(host) == []
    host.reset()
    create(host, 1, first=3)
    assert len(host.requests()) == 1 and host.seal() == {"requests": 1, "effects": 1}


def test_the_key_is_nowhere_on_disk(host: DestinationHost, tmp_path: Path) -> None:
    create(host, 1)
    key = host.ledger_key.hex().encode()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key not in path.read_bytes(), path
    environ = Path(f"/proc/{host.process.pid}/environ").read_bytes()
    cmdline = Path(f"/proc/{host.process.pid}/cmdline").read_bytes()
    assert key not in environ and key not in cmdline


@pytest.mark.parametrize(("attack", "said"), [
    (["UPDATE effects SET replay = 1 WHERE seq = 2"],  # a duplicate made to read as a replay
     "effects row seq 2 (tickets, tkt_0002) is not the row its writer signed: it was edited"),
    (["DELETE FROM effects WHERE seq = 2"], "effects rows seq 2-2 are missing: removed after they were written"),
    (["DELETE FROM effects WHERE seq = 3"],  # the tail: no hole, but fewer rows than written
     "effects: the destinations wrote 3 row(s) and 2 are there: 1 removed"),
    (["DELETE FROM effects", "DELETE FROM requests", "DELETE FROM sqlite_sequence"],
     "requests: the destinations wrote 3 row(s) and 0 are there: 3 removed"),
    (["INSERT INTO effects (destination, effect_ref, kind, replay, committed_at) "
      "VALUES ('tickets', 'tkt_9999', 'create_ticket', 0, 0)"],
     "effects row seq 4 (tickets, tkt_9999) carries no signature: no writer of the run wrote it"),
    # a genuine signature moved onto an edited row: it signs its own row's seq and content only
    (["UPDATE effects SET effect_ref = 'tkt_0001x', mac = (SELECT mac FROM effects WHERE seq = 2) WHERE seq = 1"],
     "effects row seq 1 (tickets, tkt_0001x) is not the row its writer signed"),
])
def test_every_change_behind_the_writers_back_is_named(host: DestinationHost, attack: list[str], said: str) -> None:
    create(host, 3)
    tamper(host, *attack)
    found = problems(host)
    assert any(said in problem for problem in found), found


def test_a_ledger_rolled_back_to_an_earlier_copy_is_named(host: DestinationHost, tmp_path: Path) -> None:
    """Every row of the copy is genuine and in sequence: only the writer's count tells it is not the whole."""
    create(host, 1)
    copy = tmp_path / "earlier.sqlite"
    copy_ledger(host.ledger_path, copy)
    create(host, 2, first=1)  # the duplicate the agent then wants gone
    assert verify_ledger(copy, host.ledger_key, {DESTINATIONS_WRITER: {"requests": 1, "effects": 1}}) == []
    found = verify_ledger(copy, host.ledger_key, {DESTINATIONS_WRITER: host.seal()})
    assert found == ["requests: the destinations wrote 3 row(s) and 1 are there: 2 removed (the table cut short, "
                     "cleared or rolled back to an earlier copy)",
                     "effects: the destinations wrote 3 row(s) and 1 are there: 2 removed (the table cut short, "
                     "cleared or rolled back to an earlier copy)"], found


def test_a_row_signed_with_another_key_is_not_the_writers(host: DestinationHost, tmp_path: Path) -> None:
    """Another run's destinations sign with their own key: rows copied from their ledger do not pass here."""
    create(host, 1)
    with DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "other" / "ledger.sqlite") as other:
        create(other, 1)
        copy_ledger(other.ledger_path, tmp_path / "other.sqlite")
        found = verify_ledger(tmp_path / "other.sqlite", host.ledger_key, {DESTINATIONS_WRITER: {"requests": 1,
                                                                                                "effects": 1}})
    assert "requests row seq 1 (tickets, POST /tickets) is not the row its writer signed" in found[0], found


def test_a_restart_holds_the_rows_to_what_the_process_held_before(host: DestinationHost) -> None:
    """``restart`` (the scenario's destination crash) asks the process for its account before the kill and
    holds the next process's start to it."""
    create(host, 3)
    host.restart()
    assert host.seal_problems == []
    original_start = host.start

    def start_after_tampering(timeout: float = 10.0) -> DestinationHost:
        tamper(host, "DELETE FROM effects WHERE seq = 3")  # while no process holds the file
        return original_start(timeout)

    host.start = start_after_tampering  # type: ignore[method-assign]
    host.restart()
    assert host.seal_problems == ["effects: the destinations held 3 row(s) of their own before their restart and "
                                  "2 after it: removed while they were down"], host.seal_problems
