"""DestinationHost: a real child process, its ports, restart with the ledger kept, clear errors."""

from __future__ import annotations

import os
import socket

import pydantic
import pytest
import requests

from fake_destinations.host import DestinationHost, DestinationStartError
from fake_destinations.ledger import read_effects

TICKET = {"title": "t", "project": "p", "client_reference": "op_1"}


def test_restart_keeps_ports_ledger_and_stored_keys(tmp_path):
    with DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite") as host:
        url = host.urls["tickets"]
        assert url.startswith("http://127.0.0.1:")
        pid = host.process.pid
        first = requests.post(url + "/tickets", json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)
        host.restart()
        assert host.process.pid != pid and host.urls["tickets"] == url
        again = requests.post(url + "/tickets", json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)
        assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()
        fresh = requests.post(url + "/tickets", json=TICKET, headers={"Idempotency-Key": "k2"}, timeout=10)
        assert fresh.json()["id"] == "tkt_0002"  # numbering survives the restart
    assert [e["effect_ref"] for e in read_effects(tmp_path / "ledger.sqlite")] == ["tkt_0001", "tkt_0002"]


def test_stop_ends_the_process_group(tmp_path):
    host = DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite").start()
    pid = host.process.pid
    host.stop()
    with pytest.raises(ProcessLookupError):  # nobody of the group is left to serve its ports
        os.killpg(pid, 0)
    # (not "connecting to its port now fails": under parallel tests another worker's destination may
    # bind that freed ephemeral port at once, which once failed this test on a loaded machine)


def test_crash_at_start_reports_the_child_stderr(tmp_path):
    blocker = tmp_path / "ledger.sqlite"
    blocker.mkdir()  # a directory where the ledger file should be: sqlite cannot open it
    host = DestinationHost({"tickets": {"service": "tickets"}}, blocker)
    with pytest.raises(DestinationStartError, match="exited with status .* during start-up(?s:.*)unable to open"):
        host.start()
    assert host.process is None
    host.stop()


def test_port_taken_on_restart_is_a_clear_error(tmp_path):
    host = DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite").start()
    try:
        port = host.ports["tickets"]
        host.stop()
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            with pytest.raises(DestinationStartError, match=f"cannot start.*{port}|address already in use"):
                host.start()
    finally:
        host.stop()


def test_bad_spec_is_rejected_before_any_process_starts(tmp_path):
    with pytest.raises(pydantic.ValidationError, match="idempotency(?s:.*)'stripe'"):
        DestinationHost({"tickets": {"service": "tickets", "idempotency": "stripey"}}, tmp_path / "l.sqlite")
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        DestinationHost({"tickets": {"service": "tickets", "retention": 5}}, tmp_path / "l.sqlite")


def test_the_control_plane_is_on_no_port(destinations):
    """The process listens on its destinations' ports and nothing else: reset, clock and state go over the
    pipes only the harness holds, so no process that can reach loopback can drive them."""
    from tests.common.sockets import listening_ports

    assert listening_ports(destinations.process.pid) == set(destinations.ports.values())
    response = requests.post(destinations.urls["tickets"] + "/reset", json={}, timeout=10)
    assert response.status_code == 404
    assert destinations.state()["in_flight"]["tickets"] == []  # the harness still drives it


def test_a_crash_mid_request_unlocks_its_key(tmp_path):
    import threading
    import time

    spec = {"service": "tickets", "idempotency": "ietf", "processing_delay_seconds": 30}
    with DestinationHost({"t": spec}, tmp_path / "ledger.sqlite") as host:
        url = host.urls["t"] + "/tickets"
        outcome: dict = {}

        def doomed() -> None:
            try:
                requests.post(url, json=TICKET, headers={"Idempotency-Key": "k"}, timeout=20)
            except requests.RequestException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=doomed)
        thread.start()
        deadline = time.monotonic() + 10
        while "k" not in host.state()["in_flight"]["t"]:
            assert time.monotonic() < deadline, "request never became in-flight"
            time.sleep(0.01)
        host.restart()  # SIGKILL while the request is processing: nothing committed
        thread.join(20)
        assert isinstance(outcome.get("error"), requests.ConnectionError)
        assert read_effects(host.ledger_path) == []
        host.specs["t"] = host.specs["t"].model_copy(update={"processing_delay_seconds": 0})
        host.restart()
        retry = requests.post(url, json=TICKET, headers={"Idempotency-Key": "k"}, timeout=10)
        assert retry.status_code == 201  # not 409: the dead request's lock did not survive


def test_ssh_host_key_survives_restart(tmp_path):
    import asyncio

    import asyncssh

    async def host_key(port: int) -> str:
        async with asyncssh.connect("127.0.0.1", port, username="ops", known_hosts=None, client_keys=None,
                                    agent_path=None, connect_timeout=10) as connection:
            return connection.get_server_host_key().export_public_key().decode()

    with DestinationHost({"box": {"service": "ssh"}}, tmp_path / "ledger.sqlite") as host:
        assert host.urls["box"].startswith("ssh://127.0.0.1:")
        before = asyncio.run(host_key(host.ports["box"]))
        host.restart()
        assert asyncio.run(host_key(host.ports["box"])) == before


def test_control_errors_are_clear(destinations, tmp_path):
    from fake_destinations.host import DestinationError

    with pytest.raises(DestinationError, match="control command clock refused: 'advance' must be seconds >= 0, got -5"):
        destinations.advance_clock(-5)
    with pytest.raises(DestinationError, match="'ids' must be a list of full container ids, got 'abc'"):
        destinations.agent_containers("abc")  # type: ignore[arg-type]
    idle = DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "l.sqlite")
    with pytest.raises(DestinationError, match="not running"):
        idle.reset()


def test_reading_a_missing_ledger_names_the_file(tmp_path):
    from fake_destinations.ledger import read_requests

    with pytest.raises(FileNotFoundError, match=r"effect ledger .*nowhere\.sqlite does not exist"):
        read_requests(tmp_path / "nowhere.sqlite")
    assert not (tmp_path / "nowhere.sqlite").exists()  # reading never creates an empty ledger


def test_destination_process_stops_when_its_parent_dies(tmp_path):
    """A harness killed with SIGKILL must not leave destination servers behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "child.pid"
    code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from fake_destinations.host import DestinationHost\n"
        f"host = DestinationHost({{'tickets': {{'service': 'tickets'}}}}, Path({str(tmp_path / 'l.sqlite')!r}))\n"
        "host.start()\n"
        f"Path({str(pidfile)!r}).write_text(str(host.process.pid))\n"
        "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        # write_text creates the file before it writes the pid: wait for the pid, not the file
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pidfile.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the destination process outlived its parent")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_pool_reuses_a_reset_process_for_the_same_destinations_declared_otherwise(tmp_path):
    """Same names and services: the process is reset and takes the new declarations (exploration varies
    them on every schedule); another service: another process, the least recently used one evicted."""
    import requests

    from fake_destinations.host import DestinationPool

    pool = DestinationPool(tmp_path, max_hosts=1)
    try:
        first = pool.acquire({"tickets": {"service": "tickets"}})
        pid = first.process.pid
        requests.post(first.urls["tickets"] + "/tickets", json={"title": "a", "project": "P"}, timeout=5)
        assert len(first.effects()) == 1
        again = pool.acquire({"tickets": {"service": "tickets"}})
        assert again is first and again.process.pid == pid and pool.reused == 1
        assert again.effects() == []  # reset between scenarios: nothing leaks from the last one
        stricter = pool.acquire({"tickets": {"service": "tickets", "idempotency": "ietf"}})
        assert stricter is first and stricter.process.pid == pid and pool.reused == 2
        keyless = requests.post(first.urls["tickets"] + "/tickets", json={"title": "a", "project": "P"}, timeout=5)
        assert keyless.status_code == 400  # the ietf declaration is in force: a key is required
        assert stricter.specs["tickets"].idempotency == "ietf"  # and a restart would keep it
        stricter.restart()
        assert requests.post(first.urls["tickets"] + "/tickets", json={"title": "a", "project": "P"},
                             timeout=5).status_code == 400
        other = pool.acquire({"mail": {"service": "email"}})
        assert other is not first
        assert first.process is None  # evicted beyond max_hosts: stopped, not leaked
    finally:
        pool.close()
    assert other.process is None


def test_a_reset_that_declares_other_destinations_is_refused(tmp_path):
    from fake_destinations.host import DestinationError, DestinationHost
    from fake_destinations.spec import DestinationSpec

    with DestinationHost({"tickets": {"service": "tickets"}}, tmp_path / "ledger.sqlite") as host:
        for wrong in ({"mail": DestinationSpec(service="email")}, {"tickets": DestinationSpec(service="email")}):
            with pytest.raises(DestinationError, match="reset refused: 'destinations'"):
                host.reset(specs=wrong)
        host.reset(specs={"tickets": DestinationSpec(service="tickets", lookup="none")})


def test_a_new_pool_removes_the_folders_of_dead_harnesses_only(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from fake_destinations.host import POOL_PREFIX, remove_dead_pools

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{POOL_PREFIX}{gone.pid}-abc"
    (dead / "host-1-x").mkdir(parents=True)
    live = tmp_path / f"{POOL_PREFIX}{os.getppid()}-def"
    live.mkdir()
    remove_dead_pools(tmp_path)
    assert not dead.exists() and live.exists()
