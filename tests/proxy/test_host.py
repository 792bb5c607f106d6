"""The embedded proxy host: one per process, cheap per-scenario reuse, bounded finish, and listener
ports re-chosen when another process takes one between its choice and mitmproxy's bind."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

import harness.proxy.server as proxy_server_module
from harness.journal import read_journal
from harness.proxy import ProxyHost
from harness.proxy.host import ProxyHostError
from harness.proxy.server import LISTEN_ATTEMPTS, ProxyServer


def test_shared_is_one_host_per_process(proxy_host):
    assert ProxyHost.shared() is proxy_host and proxy_host.running


def test_same_upstream_keeps_its_listener(scenario, destination):
    a = scenario.configure([])
    b = scenario.configure([])
    assert a.urls == b.urls
    assert requests.get(b.urls["tickets"] + "/tickets", timeout=5).status_code == 200


def test_several_destinations_get_their_own_listeners(proxy_host, destination, tmp_path):
    routes = proxy_host.configure({"tickets": destination.url, "mail": destination.url + "/"}, [],
                                  tmp_path / "j.ndjson")
    assert routes.urls["tickets"] != routes.urls["mail"]
    requests.get(routes.urls["mail"] + "/x", timeout=5)
    requests.get(routes.urls["tickets"] + "/y", timeout=5)
    proxy_host.finish()
    journal = read_journal(tmp_path / "j.ndjson")
    assert [(e["destination"], e["path"]) for e in journal] == [("mail", "/x"), ("tickets", "/y")]


def test_finish_waits_for_flows_in_flight(scenario, destination):
    """A held response is still in flight when finish() is called; its journal line is not lost."""
    routes = scenario.configure([{"id": "hold", "action": "hold_response", "hold_ms": 300,
                                  "match": {"method": "POST"}}])
    got = {}
    sent = threading.Thread(target=lambda: got.setdefault(
        "status", requests.post(routes.urls["tickets"] + "/tickets", json={}, timeout=10).status_code))
    sent.start()
    try:
        while not destination.requests:  # the destination has the request: the flow is in flight
            threading.Event().wait(0.01)
        assert scenario.host.finish(timeout=10) == 0
    finally:
        sent.join(15)
    assert got["status"] == 201
    (entry,) = read_journal(scenario.journal_path)
    assert (entry["fault"], entry["client_outcome"]) == ("hold_response", "response")


def test_finish_is_bounded(scenario, destination):
    routes = scenario.configure([{"id": "hold", "action": "hold_response", "hold_ms": 3000, "match": {}}])
    t = threading.Thread(target=_quiet_get, args=(routes.urls["tickets"],))
    t.start()
    try:
        while not destination.requests:
            threading.Event().wait(0.01)
        assert scenario.host.finish(timeout=0.05) == 1  # one flow still held at the deadline
    finally:
        t.join(15)
    (entry,) = read_journal(scenario.journal_path)  # journaled, not dropped: the destination saw it
    assert (entry["client_outcome"], entry["forwarded"], entry["fault"]) == ("in_flight_at_end", True, "hold_response")


def _quiet_get(url):
    try:
        requests.get(url + "/", timeout=(5, 0.2))
    except requests.RequestException:
        pass


STOP = r"""
import socket, sys, threading
from harness.proxy import ProxyHost
host = ProxyHost.shared()
routes = host.configure({"tickets": "http://127.0.0.1:9"}, [], sys.argv[1])
port = int(routes.urls["tickets"].rsplit(":", 1)[1])
socket.create_connection(("127.0.0.1", port), timeout=5).close()
host.stop()
assert not host.running, "proxy thread still alive"
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    print("still listening")
except ConnectionRefusedError:
    print("stopped")
"""


def test_stop_closes_listeners_and_thread(tmp_path):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", STOP, str(tmp_path / "j.ndjson")], capture_output=True, text=True,
                         timeout=60, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stopped"


def test_a_later_mitmproxy_test_context_does_not_break_the_shared_proxy(scenario):
    """mitmproxy's ctx is global: its test helper builds a Master that takes it over for good.
    The shared host takes it back on configure, so scenarios keep working in the same process."""
    import requests
    from mitmproxy.test import taddons

    with taddons.context():
        pass  # leaves mitmproxy.ctx pointing at a dead test master
    routes = scenario.configure([{"id": "lose", "match": {"nth": 1}, "action": "drop_response_after_commit"}])
    with pytest.raises(requests.ConnectionError):
        requests.post(routes.urls["tickets"] + "/tickets", json={"title": "x", "project": "P"}, timeout=5)
    assert [e["client_outcome"] for e in scenario.journal()] == ["connection_closed"]


def squat() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.fixture
def embedded() -> Iterator[ProxyServer]:
    """The proxy server itself, in this process (it runs in the proxy's process in a harness run)."""
    server = ProxyServer(confdir=Path(tempfile.mkdtemp(prefix="mitm-conf-")))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.confdir, ignore_errors=True)


def test_a_listener_port_taken_before_the_proxy_binds_it_is_chosen_again(embedded, destination, tmp_path,
                                                                          monkeypatch):
    real, chosen = proxy_server_module.free_port, []
    with squat() as squatter:
        taken = squatter.getsockname()[1]

        def first_one_taken(host: str = "127.0.0.1") -> int:
            chosen.append(taken if not chosen else real(host))
            return chosen[-1]

        monkeypatch.setattr(proxy_server_module, "free_port", first_one_taken)
        routes = embedded.configure({"tickets": destination.url}, [], tmp_path / "journal.ndjson")
        port = urlsplit(routes.urls["tickets"]).port
        assert chosen[0] == taken and port == chosen[-1] != taken
        answer = requests.post(routes.urls["tickets"] + "/tickets", json={"title": "x"}, timeout=10)
        assert answer.status_code == 201
    embedded.finish()
    assert [e["upstream_status"] for e in read_journal(tmp_path / "journal.ndjson")] == [201]


def test_a_port_taken_at_every_attempt_is_a_clear_error(embedded, destination, tmp_path, monkeypatch):
    with squat() as squatter:
        taken = squatter.getsockname()[1]
        monkeypatch.setattr(proxy_server_module, "free_port", lambda host="127.0.0.1": taken)
        with pytest.raises(ProxyHostError, match=f"failed to start.*{taken}.*in use"):
            embedded.configure({"tickets": destination.url}, [], tmp_path / "j1.ndjson")
    monkeypatch.undo()
    assert embedded.configure({"tickets": destination.url}, [], tmp_path / "j2.ndjson").urls["tickets"]
    assert LISTEN_ATTEMPTS > 1
