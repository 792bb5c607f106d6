"""read_har, read_flows and incident_format on real files: the harness's own run, a HAR and a flow dump that
real mitmproxy (``mitmdump -w FILE --set hardump=FILE``) recorded of real clients (requests, httpx) talking to
a loopback server (one answer the server closed without sending), a hand-written Chrome HAR, bad input."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from harness.contract import EvidenceLayout
from harness.incident.flows import read_flows
from harness.incident.har import read_har
from harness.incident.model import IncidentError
from harness.incident.sniff import incident_format
from harness.journal import read_journal
from harness.proxy.host import free_port
from harness.proxy.runtime import proxy_python

TOKEN = "sk_live_recordedtoken42"


# -- real traffic through real mitmproxy -------------------------------------------------------------

class Tickets(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/lost"):  # committed, then closed without a word
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._answer(201, {"id": "tkt_1", "echo": json.loads(body or b"{}")})

    def do_GET(self) -> None:  # noqa: N802
        self._answer(200, {"items": ["tkt_1"]})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(HAR, flow dump, the server's host:port) of: requests POST 201, httpx GET 200, requests POST that the
    server closed without answering, all through ``mitmdump`` in reverse mode."""
    folder = tmp_path_factory.mktemp("recorded")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Tickets)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"127.0.0.1:{server.server_address[1]}"
    port = free_port()
    har, flows = folder / "recorded.har", folder / "recorded.mitm"
    dump = subprocess.Popen(
        [str(proxy_python()), "-c", "from mitmproxy.tools.main import mitmdump; mitmdump()", "-q",
         "--mode", f"reverse:http://{upstream}", "--listen-host", "127.0.0.1", "-p", str(port),
         "-w", str(flows), "--set", f"hardump={har}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert dump.poll() is None and time.monotonic() < deadline, "mitmdump did not start"
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        assert requests.post(f"{url}/tickets?src=test", json={"title": "disk full"}, timeout=5,
                             headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "op_1"}).status_code == 201
        time.sleep(0.01)
        assert httpx.get(f"{url}/tickets", timeout=5).status_code == 200
        time.sleep(0.01)
        lost = requests.post(f"{url}/lost", json={"title": "printer"}, timeout=5, headers={"Idempotency-Key": "op_2"})
        assert lost.status_code == 502  # mitmproxy's own answer when the server closed on it
    finally:
        os.killpg(dump.pid, signal.SIGINT)  # mitmdump writes the HAR on exit
        dump.wait(30)
        server.shutdown()
    assert har.is_file() and flows.is_file(), dump.stderr.read().decode() if dump.stderr else ""
    yield har, flows, upstream


@pytest.mark.parametrize("reader", ["har", "flows"])
def test_real_clients_through_real_mitmproxy(recorded, reader):
    har, flows, upstream = recorded
    path = har if reader == "har" else flows
    assert incident_format(path) == reader
    incident = read_har(path) if reader == "har" else read_flows(path)
    assert (incident.format, incident.source) == (reader, str(path))
    created, listed, lost = incident.exchanges
    assert [(e.method, e.path, e.status) for e in incident.exchanges] == \
        [("POST", "/tickets", 201), ("GET", "/tickets", 200), ("POST", "/lost", None)]
    assert {e.destination for e in incident.exchanges} == {upstream}
    assert created.query == "src=test"
    assert created.headers["authorization"] == f"Bearer {TOKEN}"  # a reader keeps what the file holds
    assert created.headers["idempotency-key"] == "op_1" and "Idempotency-Key" not in created.headers
    assert json.loads(created.body) == {"title": "disk full"}
    assert json.loads(created.response_body)["id"] == "tkt_1"
    assert created.response_headers["content-type"] == "application/json"
    assert listed.headers["user-agent"].startswith("python-httpx")
    assert (lost.status, lost.response_body, lost.upstream_status, lost.fault) == (None, b"", None, None)
    assert lost.error == "server closed connection"  # mitmproxy's words
    assert json.loads(lost.body) == {"title": "printer"}
    assert all(e.started and e.seconds is not None for e in incident.exchanges)
    assert [e.started for e in incident.exchanges] == sorted(e.started for e in incident.exchanges)  # type: ignore


# -- the harness's own run -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def harness_run(tmp_path_factory: pytest.TempPathFactory) -> EvidenceLayout:
    from harness.engine import run_scenario
    from harness.resources import catalogue_dir
    from harness.scenario import load

    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path_factory.mktemp("ev"))
    return EvidenceLayout(result.evidence_dir)


@pytest.mark.parametrize("reader", ["har", "flows"])
def test_the_harness_own_traffic_files(harness_run, reader):
    path = harness_run.traffic_har if reader == "har" else harness_run.traffic_flows
    assert incident_format(path) == reader
    incident = read_har(path) if reader == "har" else read_flows(path)
    journal = read_journal(harness_run.journal)
    assert len(incident.exchanges) == len(journal)
    for exchange, line in zip(incident.exchanges, journal, strict=True):
        assert (exchange.destination, exchange.method, exchange.path) == \
            (line["destination"], line["method"], line["path"])
        assert exchange.status == (line["client_status"] if line["client_outcome"] == "response" else None)
        assert (exchange.upstream_status, exchange.fault) == (line["upstream_status"], line["fault"])
        assert exchange.headers["authorization"] == line["headers"]["authorization"]  # redacted as in the journal
        assert exchange.headers.get("idempotency-key") == line["idempotency_key"]
    lost = incident.exchanges[0]
    assert (lost.status, lost.error, lost.fault, lost.upstream_status) == \
        (None, "net::ERR_EMPTY_RESPONSE", "drop_response_after_commit", 201)
    assert lost.response_body == b"" and lost.body  # the client's request body, no answer


def test_both_readers_agree_on_a_run(harness_run):
    def shape(incident: Any) -> list[tuple[Any, ...]]:
        return [(e.destination, e.method, e.path, e.query, e.body, e.status, e.error, e.response_body,
                 e.upstream_status, e.fault) for e in incident.exchanges]

    assert shape(read_har(harness_run.traffic_har)) == shape(read_flows(harness_run.traffic_flows))


# -- what Chrome's devtools write ------------------------------------------------------------------------

def chrome_entry(started: str, method: str, url: str, status: int, error: str | None = None,
                 body: str | None = None, content: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "_initiator": {"type": "script"}, "_priority": "High", "_resourceType": "fetch", "cache": {},
        "connection": "443", "pageref": "page_1", "serverIPAddress": "203.0.113.7", "startedDateTime": started,
        "time": 1234.5,
        "request": {"method": method, "url": url, "httpVersion": "http/2.0", "cookies": [],
                    "headers": [{"name": ":authority", "value": "api.example.com"},
                                {"name": ":method", "value": method},
                                {"name": "authorization", "value": "Bearer xyz"},
                                {"name": "Accept", "value": "application/json"},
                                {"name": "accept", "value": "text/plain"}],
                    "queryString": [], "headersSize": -1, "bodySize": len(body or "")},
        "response": {"status": status, "statusText": "", "httpVersion": "http/2.0" if status else "",
                     "headers": [{"name": "content-type", "value": "application/json"}] if status else [],
                     "cookies": [], "content": content or {"size": 0, "mimeType": "x-unknown"},
                     "redirectURL": "", "headersSize": -1, "bodySize": -1, "_transferSize": 0},
        "timings": {"blocked": 1.0, "dns": -1, "ssl": -1, "connect": -1, "send": 0.2, "wait": 1233.3,
                    "receive": 0},
    }
    if error is not None:
        entry["response"]["_error"] = error
    if body is not None:
        entry["request"]["postData"] = {"mimeType": "application/json", "text": body}
    return entry


def test_a_chrome_har(tmp_path):
    page = {"startedDateTime": "2026-11-30T10:00:00.000Z", "id": "page_1", "title": "app", "pageTimings": {}}
    encoded = base64.b64encode(b'{"id": "ord_9"}').decode()
    entries = [  # out of order, as a HAR merged from two tabs can be
        chrome_entry("2026-11-30T10:00:05.250Z", "POST", "https://api.example.com/orders", 0,
                     "net::ERR_TIMED_OUT", body='{"sku": "A"}'),
        chrome_entry("2026-11-30T10:00:01.000Z", "POST", "https://api.example.com/orders?x=1", 0,
                     "net::ERR_EMPTY_RESPONSE", body='{"sku": "A"}'),
        chrome_entry("2026-11-30T10:00:09.500Z", "GET", "https://api.example.com:8443/orders/ord_9", 200,
                     content={"size": 15, "mimeType": "application/json", "text": encoded, "encoding": "base64"}),
        chrome_entry("2026-11-30T10:00:00.500Z", "GET", "data:image/png;base64,iVBORw0KGgo=", 200),
    ]
    path = tmp_path / "chrome.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
                                        "pages": [page], "entries": entries}}))
    assert incident_format(path) == "har"
    incident = read_har(path)
    first, second, third = incident.exchanges
    assert [(e.line, e.status, e.error) for e in incident.exchanges] == \
        [(2, None, "net::ERR_EMPTY_RESPONSE"), (1, None, "net::ERR_TIMED_OUT"), (3, 200, None)]
    assert (first.destination, first.path, first.query) == ("api.example.com:443", "/orders", "x=1")
    assert third.destination == "api.example.com:8443"
    assert first.headers == {"authorization": "Bearer xyz", "accept": "application/json, text/plain"}
    assert first.body == b'{"sku": "A"}' and first.seconds == pytest.approx(1.2345)
    assert third.response_body == b'{"id": "ord_9"}'
    assert first.started == pytest.approx(1796032801.0)
    assert incident.notes == ["1 HAR entry left out: not an http(s) URL (data:)"]


# -- bad input -------------------------------------------------------------------------------------------

def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(("content", "said"), [
    ("this is not json\n", "not a HAR file: not JSON"),
    ('{"entries": []}', "JSON without log.entries"),
    ("[1, 2]", "JSON without log.entries (a JSON list)"),
    ('{"log": {"version": "1.2", "entries": []}}', "a HAR file with no HTTP requests"),
    (json.dumps({"log": {"entries": [chrome_entry("2026-11-30T10:00:00Z", "GET", "data:,x", 200)]}}),
     "no HTTP requests (log.entries holds 1 entry (1 HAR entry left out"),
    (b"\xff\xfe\x00garbage", "not a HAR file: not text"),
])
def test_read_har_refuses_what_is_no_har(tmp_path, content, said):
    path = write(tmp_path, "incident.har", content)
    with pytest.raises(IncidentError) as caught:
        read_har(path)
    assert str(caught.value).startswith(str(path)) and said in str(caught.value)
    assert "expected" in str(caught.value)
    assert incident_format(path) in (None, "har")


@pytest.mark.parametrize(("content", "said"), [
    ("hello, not a flow file\n", "not a mitmproxy flow dump"),
    ('{"log": {"entries": []}}', "JSON (a HAR file?), not a mitmproxy flow dump"),
    ("", "a flow dump with no HTTP requests"),
])
def test_read_flows_refuses_what_is_no_flow_dump(tmp_path, content, said):
    path = write(tmp_path, "incident.mitm", content)
    with pytest.raises(IncidentError) as caught:
        read_flows(path)
    message = str(caught.value)
    assert said in message and (str(path.resolve()) in message or str(path) in message)
    assert "Traceback" not in message


def test_read_flows_of_no_file(tmp_path):
    with pytest.raises(IncidentError, match="no such file"):
        read_flows(tmp_path / "missing.mitm")
    with pytest.raises(IncidentError, match="cannot read"):
        read_har(tmp_path / "missing.har")


def test_a_flow_dump_cut_off_mid_flow_keeps_its_whole_flows(harness_run, tmp_path):
    data = harness_run.traffic_flows.read_bytes()
    whole = len(read_flows(harness_run.traffic_flows).exchanges)
    cut = write(tmp_path, "cut.mitm", data[: len(data) - 40])
    incident = read_flows(cut)
    assert len(incident.exchanges) == whole - 1
    assert any("cut off" in note for note in incident.notes)


def test_incident_format_of_other_files(tmp_path, harness_run):
    assert incident_format(harness_run.journal) is None
    assert incident_format(harness_run.context) is None
    assert incident_format(harness_run.folder) is None
    assert incident_format(write(tmp_path, "digits.txt", "12: not a tnetstring")) is None
    assert incident_format(tmp_path / "missing") is None
