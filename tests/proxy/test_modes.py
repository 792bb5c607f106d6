"""Reverse, forward and HTTPS modes with the agent as a real process using only the environment it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

LOSE_FIRST = {"id": "lose", "action": "drop_response_after_commit", "match": {"method": "POST", "nth": 1}}

# The agent: a POST whose answer is lost, then a lookup; prints what it saw as JSON.
AGENT = r"""
import json, os, sys
client = sys.argv[1]
url = os.environ["HARNESS_DESTINATION_TICKETS"]
seen = []
if client == "requests":
    import requests
    try:
        seen.append(requests.post(url + "/tickets", json={"t": 1}, timeout=5).status_code)
    except requests.RequestException as e:
        seen.append(type(e).__name__)
    seen.append(requests.get(url + "/tickets", timeout=5).status_code)
else:
    import httpx
    with httpx.Client(timeout=5) as c:  # httpx reads HTTP(S)_PROXY and SSL_CERT_FILE from the environment
        try:
            seen.append(c.post(url + "/tickets", json={"t": 1}).status_code)
        except httpx.HTTPError as e:
            seen.append(type(e).__name__)
        seen.append(c.get(url + "/tickets").status_code)
print(json.dumps(seen))
"""


def run_agent(routes, client):
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(routes.env, HARNESS_DESTINATION_TICKETS=routes.urls["tickets"])
    out = subprocess.run([sys.executable, "-c", AGENT, client], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


LOST = {"requests": {"reverse": "ConnectionError", "reverse-https": "ConnectionError",
                     "forward": "ProxyError", "forward-https": "ProxyError"},
        "httpx": {"reverse": "RemoteProtocolError", "reverse-https": "RemoteProtocolError",
                  "forward": "RemoteProtocolError", "forward-https": "RemoteProtocolError"}}


@pytest.mark.parametrize("client", ["requests", "httpx"])
@pytest.mark.parametrize("mode", ["reverse", "reverse-https", "forward", "forward-https"])
def test_lost_response_in_every_mode(scenario, destination, mode, client):
    routes = scenario.configure([LOSE_FIRST], mode=mode)
    scheme = "https" if mode.endswith("https") else "http"
    assert routes.urls["tickets"].startswith(scheme + "://")
    if mode.startswith("forward"):
        assert routes.env["HTTP_PROXY"] == routes.env["HTTPS_PROXY"] and routes.env["NO_PROXY"] == ""
        assert routes.urls["tickets"].split("://")[1] == destination.url.split("://")[1]
    if scheme == "https":
        assert routes.env["SSL_CERT_FILE"] == routes.env["REQUESTS_CA_BUNDLE"] == str(routes.ca_cert)
        assert routes.ca_cert.exists()
    else:
        assert "SSL_CERT_FILE" not in routes.env
    assert run_agent(routes, client) == [LOST[client][mode], 200]
    assert len(destination.effects) == 1
    lost, lookup = scenario.journal()
    assert (lost["destination"], lost["fault"], lost["forwarded"], lost["client_outcome"]) == \
        ("tickets", "drop_response_after_commit", True, "connection_closed")
    assert (lookup["method"], lookup["client_status"]) == ("GET", 200)


def test_unknown_mode_and_bad_route_are_clear(proxy_host, tmp_path):
    with pytest.raises(ValueError,
                       match="proxy mode 'socks' is not one of reverse, reverse-https, forward, forward-https"):
        proxy_host.configure({}, [], tmp_path / "j", mode="socks")
    with pytest.raises(ValueError, match="route 'tickets': upstream 'localhost:80' must be http://HOST:PORT"):
        proxy_host.configure({"tickets": "localhost:80"}, [], tmp_path / "j")
    with pytest.raises(ValueError, match=r"refuse_connection names unknown destination\(s\) \['mail'\]"):
        proxy_host.configure({}, [{"id": "x", "action": "refuse_connection", "match": {"destination": "mail"}}],
                             tmp_path / "j")


NAGLE = r"""
import json, socket, sys, requests
from harness.proxy import disable_nagle_for_proxies
if sys.argv[1] == "fixed":
    disable_nagle_for_proxies()
s = requests.Session()
s.post(sys.argv[2] + "/tickets", json={}, timeout=5)
pool = next(iter(s.get_adapter(sys.argv[2]).proxy_manager.values())).pools
conn = next(iter(pool._container.values())).pool.queue[-1]
print(conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
"""


@pytest.mark.parametrize("variant, nodelay", [("plain", 0), ("fixed", 1)])
def test_nagle_trap_is_neutralised(scenario, variant, nodelay):
    """urllib3 leaves Nagle on behind a forward proxy; disable_nagle_for_proxies turns it off."""
    routes = scenario.configure([], mode="forward")
    env = {**os.environ, **routes.env}
    out = subprocess.run([sys.executable, "-c", NAGLE, variant, routes.urls["tickets"]], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == (1 if nodelay else 0)
