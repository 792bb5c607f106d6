"""The traffic files (traffic.har, traffic.mitm): written by the real proxy, read back by mitmproxy itself.

A real scenario run leaves both in its evidence folder, one entry per journal line with the client's
statuses; every fault gives the status / ``_error`` a browser would have written; a secret planted in
headers, query and bodies reaches neither file; the HAR is valid JSON after every flow (a killed run keeps
what it had).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from mitmproxy import io as mitm_io

from harness.contract import FLOW_HEADER, EvidenceLayout
from harness.journal import read_journal

SECRET = "hsk_canary_plantedsecret0123456789"


def read_flow_file(path: Path) -> list[Any]:
    with path.open("rb") as f:
        return list(mitm_io.FlowReader(f).stream())


def mitmdump_reads(path: Path) -> subprocess.CompletedProcess[str]:
    """``mitmdump -n -r FILE`` under the proxy's interpreter, as a user runs it (docs/proxy.md)."""
    return subprocess.run([sys.executable, "-m", "harness", "proxy", "mitmdump", "-n", "-q", "-r", str(path)],
                          capture_output=True, text=True, timeout=120)


def configure(scenario, rules, tmp_path: Path, secrets: dict[str, str] | None = None):
    return scenario.configure(rules, har_path=tmp_path / "traffic.har", flows_path=tmp_path / "traffic.mitm",
                              secrets=secrets or {})


# -- a real run of the harness ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["response_lost", "timeout_late_success"])
def test_a_scenario_run_leaves_both_traffic_files(tmp_path, name):
    from harness.engine import run_scenario
    from harness.resources import catalogue_dir
    from harness.scenario import load

    result = run_scenario(load(catalogue_dir() / f"{name}.yaml"), evidence_root=tmp_path)
    layout = EvidenceLayout(result.evidence_dir)
    journal = read_journal(layout.journal)
    assert journal, "the run crossed the proxy"
    canaries = json.loads(layout.context.read_text())["secrets"].values()

    har = json.loads(layout.traffic_har.read_text())
    assert har["log"]["version"] == "1.2"
    entries = har["log"]["entries"]
    assert [e["_harness"]["flow_id"] for e in entries] == [line["flow_id"] for line in journal]
    for entry, line in zip(entries, journal, strict=True):
        facts = entry["_harness"]
        assert {k: facts[k] for k in ("rule_id", "fault", "client_outcome", "upstream_status", "destination")} == \
            {k: line[k] for k in ("rule_id", "fault", "client_outcome", "upstream_status", "destination")}
        assert entry["response"]["status"] == (line["client_status"] or 0)
        assert ("_error" in entry["response"]) == (line["client_outcome"] != "response")
        assert entry["request"]["method"] == line["method"]
        assert FLOW_HEADER.lower() not in {h["name"].lower() for h in entry["request"]["headers"]}
    (faulted,) = [e for e in entries if e["_harness"]["fault"]]  # the journal's order is the order fates were sealed
    lost = faulted["response"]
    assert lost["_error"] == {"response_lost": "net::ERR_EMPTY_RESPONSE",
                              "timeout_late_success": "net::ERR_TIMED_OUT"}[name]
    assert faulted["request"]["postData"]["text"], "request bodies are kept"
    assert any(e["response"].get("content", {}).get("text") for e in entries), "response bodies are kept"

    flows = read_flow_file(layout.traffic_flows)
    assert [f.metadata["harness"]["flow_id"] for f in flows] == [line["flow_id"] for line in journal]
    for flow, line in zip(flows, journal, strict=True):
        if line["client_outcome"] == "response":
            assert flow.error is None and flow.response.status_code == line["client_status"]
        else:  # the client got nothing; the flow keeps what it lost: the destination's answer
            assert flow.error is not None and flow.response.status_code == line["upstream_status"]
    done = mitmdump_reads(layout.traffic_flows)
    assert done.returncode == 0, done.stderr

    for file in (layout.traffic_har, layout.traffic_flows):
        data = file.read_bytes()
        for canary in canaries:
            assert canary.encode() not in data, f"{file.name} holds a run secret"
        assert b"redacted:sha256:" in data  # the agent's Authorization header, as the journal writes it


# -- every fault, as a browser would have recorded it ---------------------------------------------------

def rule(action: str, **params: Any) -> dict[str, Any]:
    return {"id": f"r_{action}", "action": action, "match": {"method": "POST", "nth": 1}, **params}


FAULTS = [  # (rule, the HAR's status, its _error)
    (rule("drop_response_after_commit"), 0, "net::ERR_EMPTY_RESPONSE"),
    (rule("drop_request"), 0, "net::ERR_EMPTY_RESPONSE"),
    (rule("reset_after_commit"), 0, "net::ERR_CONNECTION_RESET"),
    (rule("truncate_body", keep_bytes=5), 201, "net::ERR_CONTENT_LENGTH_MISMATCH"),
    (rule("malformed_chunk"), 201, "net::ERR_INVALID_CHUNKED_ENCODING"),
    (rule("synthetic_status", status=503, retry_after=2), 503, None),
    (rule("replace_status", status=500), 500, None),
    (rule("latency", delay_ms=10), 201, None),
    (rule("duplicate_delivery"), 201, None),
]


@pytest.mark.parametrize(("fault", "status", "error"), FAULTS, ids=[f[0]["action"] for f in FAULTS])
def test_each_fault_is_recorded_as_the_client_saw_it(scenario, tmp_path, fault, status, error):
    routes = configure(scenario, [fault], tmp_path)
    try:
        requests.post(routes.urls["tickets"] + "/tickets", json={"title": "disk full"}, timeout=5)
    except requests.RequestException:
        pass
    journal = scenario.journal()  # finish(): both files closed
    (entry,) = json.loads((tmp_path / "traffic.har").read_text())["log"]["entries"]
    assert (entry["response"]["status"], entry["response"].get("_error")) == (status, error)
    assert entry["response"]["status"] == (journal[0]["client_status"] or 0)
    assert entry["_harness"]["fault"] == fault["action"]
    (flow,) = read_flow_file(tmp_path / "traffic.mitm")
    assert (flow.error.msg if flow.error else None) == error
    assert flow.metadata["harness"]["upstream_status"] == journal[0]["upstream_status"]
    if fault["action"] == "replace_status":
        assert flow.response.status_code == 500 and flow.metadata["harness"]["upstream_status"] == 201


def test_a_held_response_past_the_clients_timeout(scenario, tmp_path):
    routes = configure(scenario, [rule("hold_response", hold_ms=2000)], tmp_path)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(routes.urls["tickets"] + "/tickets", json={"title": "slow"}, timeout=0.3)
    assert scenario.journal()[0]["client_outcome"] == "timeout"
    (entry,) = json.loads((tmp_path / "traffic.har").read_text())["log"]["entries"]
    assert (entry["response"]["status"], entry["response"]["_error"]) == (0, "net::ERR_TIMED_OUT")
    assert entry["time"] >= 250  # how long the client waited


def test_a_down_destination_is_mitmproxys_502(proxy_host, tmp_path):
    from harness.proxy.host import free_port

    routes = proxy_host.configure({"tickets": f"http://127.0.0.1:{free_port()}"}, [], tmp_path / "j.ndjson",
                                  har_path=tmp_path / "t.har", flows_path=tmp_path / "t.mitm")
    assert requests.get(routes.urls["tickets"] + "/x", timeout=5).status_code == 502
    proxy_host.finish()
    (entry,) = json.loads((tmp_path / "t.har").read_text())["log"]["entries"]
    assert entry["response"]["status"] == 502 and "_error" not in entry["response"]
    (flow,) = read_flow_file(tmp_path / "t.mitm")
    assert flow.error is None and flow.response.status_code == 502
    assert flow.metadata["harness"]["upstream_error"]


# -- secrets ------------------------------------------------------------------------------------------

def test_a_planted_secret_reaches_neither_file(scenario, tmp_path, destination):
    routes = configure(scenario, [], tmp_path, secrets={"TICKETS": SECRET})
    url = routes.urls["tickets"]
    requests.post(f"{url}/tickets?token={SECRET}", json={"title": "x", "api_key": SECRET}, timeout=5,
                  headers={"Authorization": f"Bearer {SECRET}", "X-Api-Key": f"key {SECRET}",
                           "Cookie": f"session={SECRET}"})
    requests.post(f"{url}/tickets", data=gzip.compress(json.dumps({"secret": SECRET}).encode()), timeout=5,
                  headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    journal = scenario.journal()
    assert len(journal) == 2 and SECRET.encode() in destination.requests[0]["body"]  # it did cross the wire
    for name in ("traffic.har", "traffic.mitm"):
        data = (tmp_path / name).read_bytes()
        assert SECRET.encode() not in data, name
    har = json.loads((tmp_path / "traffic.har").read_text())
    first = {h["name"].lower(): h["value"] for h in har["log"]["entries"][0]["request"]["headers"]}
    # exactly as the journal writes them
    assert {k: first[k] for k in ("authorization", "x-api-key", "cookie")} == \
        {k: journal[0]["headers"][k] for k in ("authorization", "x-api-key", "cookie")}
    assert "redacted:sha256:" in har["log"]["entries"][0]["request"]["url"]
    assert "redacted:sha256:" in har["log"]["entries"][0]["request"]["postData"]["text"]
    flows = read_flow_file(tmp_path / "traffic.mitm")
    assert b"redacted:sha256:" in flows[1].request.get_content()


# -- a killed run keeps what it had -------------------------------------------------------------------

def test_both_files_are_whole_after_every_flow(scenario, tmp_path):
    routes = configure(scenario, [], tmp_path)
    for n in range(1, 4):
        assert requests.get(routes.urls["tickets"] + f"/tickets?n={n}", timeout=5).status_code == 200
        # before finish(): what a run killed now would leave (written on the proxy loop's next turn)
        deadline = time.monotonic() + 5
        while len(read_flow_file(tmp_path / "traffic.mitm")) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(read_flow_file(tmp_path / "traffic.mitm")) == n
        assert len(json.loads((tmp_path / "traffic.har").read_text())["log"]["entries"]) == n
    scenario.journal()


def test_no_paths_no_files(scenario, tmp_path):
    routes = scenario.configure([])
    requests.get(routes.urls["tickets"] + "/tickets", timeout=5)
    scenario.journal()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.ndjson"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
