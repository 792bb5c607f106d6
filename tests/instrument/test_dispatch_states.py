"""The instrumentation against real loopback servers: each way a request can end gets its dispatch state,
for every client it patches (requests, urllib3, httpx sync and async)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import urllib3

from harness.events import validate_event
from harness.fingerprint import fingerprint
from harness.instrument import instrument
from tests.instrument.loopback import INTENT, Reply, events, harness_env, refused_port, serving

TIMEOUT = (5.0, 3.0)  # connect, read: the hanging server holds past the read timeout; an answer comes well within it


def via_requests(method: str, url: str, body: Any, headers: dict[str, str]) -> int:
    return requests.request(method, url, json=body, headers=headers, timeout=TIMEOUT).status_code


def via_urllib3(method: str, url: str, body: Any, headers: dict[str, str]) -> int:
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=TIMEOUT[0], read=TIMEOUT[1]))
    data = json.dumps(body).encode() if body is not None else None
    return pool.request(method, url, body=data, headers={**headers, "Content-Type": "application/json"}).status


def via_httpx(method: str, url: str, body: Any, headers: dict[str, str]) -> int:
    with httpx.Client(timeout=httpx.Timeout(TIMEOUT[1], connect=TIMEOUT[0])) as client:
        return client.request(method, url, json=body, headers=headers).status_code


def via_httpx_async(method: str, url: str, body: Any, headers: dict[str, str]) -> int:
    async def go() -> int:
        async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT[1], connect=TIMEOUT[0])) as client:
            return (await client.request(method, url, json=body, headers=headers)).status_code
    return asyncio.run(go())


CLIENTS: dict[str, Callable[[str, str, Any, dict[str, str]], int]] = {
    "requests": via_requests, "urllib3": via_urllib3, "httpx": via_httpx, "httpx_async": via_httpx_async}


def create(tmp: Path, url: str, client: str, *, lookup: bool = False) -> list[dict[str, Any]]:
    """One operation scope: a POST (and a lookup); its errors swallowed as an agent would; the log."""
    send = CLIENTS[client]
    with instrument(env=harness_env(tmp, url)) as audit, audit.operation(INTENT) as op:
        body = {**INTENT["params"], "client_reference": op.operation_id}
        try:
            send("POST", url + "/tickets", body, {"Idempotency-Key": op.idempotency_key})
        except Exception:  # noqa: BLE001 - the log says what happened, that is the point
            pass
        if lookup:
            try:
                send("GET", url + "/tickets?client_reference=" + op.operation_id, None, {})
            except Exception:  # noqa: BLE001
                pass
    log = events(tmp)
    for record in log:
        model, error = validate_event(record)
        assert error is None, (record, error)
    return log


def only(log: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in log if e["event"] == event]


@pytest.mark.parametrize("client", CLIENTS)
def test_connection_refused_is_not_sent_and_failed(client: str, tmp_path: Path) -> None:
    log = create(tmp_path, f"http://127.0.0.1:{refused_port()}", client)
    [attempt] = only(log, "attempt")
    assert attempt["dispatch_state"] == "not_sent"
    [resolution] = only(log, "resolution")
    assert resolution["state"] == "failed"  # nothing left the machine: failing it is the truth
    assert resolution["evidence"] == [attempt["attempt_id"]]


@pytest.mark.parametrize("client", CLIENTS)
def test_server_closing_after_reading_is_sent_no_response_and_unknown(client: str, tmp_path: Path) -> None:
    with serving([Reply(action="close")]) as server:
        log = create(tmp_path, server.url, client)
    [attempt] = only(log, "attempt")
    assert attempt["dispatch_state"] == "sent_no_response"
    assert only(log, "resolution")[0]["state"] == "unknown"
    [(method, path, headers, body)] = server.requests
    assert (method, path) == ("POST", "/tickets")
    assert attempt["request_fingerprint"] == fingerprint(json.loads(body))  # the body as sent
    # the key the request carried is the attempt's; the operation declares none the agent did not give (it may
    # send a key of its own)
    assert attempt["idempotency_key"] == headers["idempotency-key"]
    assert "idempotency_key" not in only(log, "operation")[0]
    assert attempt["traceparent"] == headers["traceparent"]  # added, since the agent sent none


@pytest.mark.parametrize("client", CLIENTS)
def test_server_hanging_past_the_read_timeout_is_sent_no_response(client: str, tmp_path: Path) -> None:
    with serving([Reply(action="hang")]) as server:
        log = create(tmp_path, server.url, client)
    [attempt] = only(log, "attempt")
    assert attempt["dispatch_state"] == "sent_no_response"
    assert "timeout" in attempt["error"].lower() or "timed out" in attempt["error"].lower()
    assert only(log, "resolution")[0]["state"] == "unknown"


@pytest.mark.parametrize("client", CLIENTS)
def test_truncated_body_is_sent_no_response(client: str, tmp_path: Path) -> None:
    with serving([Reply(body={"id": "tkt_0001"}, action="truncate", declared_length=500)]) as server:
        log = create(tmp_path, server.url, client)
    [attempt] = only(log, "attempt")
    assert attempt["dispatch_state"] == "sent_no_response", attempt
    assert any(word in attempt["error"] for word in ("broke off", "IncompleteRead"))
    assert only(log, "resolution")[0]["state"] == "unknown"


@pytest.mark.parametrize("client", CLIENTS)
def test_answer_is_response_received_with_the_effect_ref(client: str, tmp_path: Path) -> None:
    with serving([Reply(201, {"id": "tkt_0007", "title": "x"})]) as server:
        log = create(tmp_path, server.url, client)
    [attempt] = only(log, "attempt")
    assert (attempt["dispatch_state"], attempt["http_status"], attempt["effect_refs"]) == \
        ("response_received", 201, ["tkt_0007"])
    [resolution] = only(log, "resolution")
    assert (resolution["state"], resolution["effect_refs"], resolution["evidence"]) == \
        ("succeeded", ["tkt_0007"], [attempt["attempt_id"]])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_5xx_is_an_answer_but_no_proof(client: str, tmp_path: Path) -> None:
    with serving([Reply(500, {"error": "boom"})]) as server:
        log = create(tmp_path, server.url, client)
    [attempt] = only(log, "attempt")
    assert (attempt["dispatch_state"], attempt["http_status"]) == ("response_received", 500)
    assert only(log, "resolution")[0]["state"] == "unknown"  # it may have committed before failing


@pytest.mark.parametrize("client", CLIENTS)
def test_a_4xx_proves_nothing_was_done(client: str, tmp_path: Path) -> None:
    with serving([Reply(400, {"error": "missing title"})]) as server:
        log = create(tmp_path, server.url, client)
    assert only(log, "resolution")[0]["state"] == "failed"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_lookup_is_an_observation_and_closes_the_unknown(client: str, tmp_path: Path) -> None:
    with serving([Reply(action="close"), Reply(200, {"items": [{"id": "tkt_0001"}]})]) as server:
        log = create(tmp_path, server.url, client, lookup=True)
    [attempt] = only(log, "attempt")  # the lookup is not an attempt (H013)
    [observation] = only(log, "observation")
    assert (observation["source"], observation["found"], observation["effect_refs"]) == \
        ("lookup", True, ["tkt_0001"])
    [resolution] = only(log, "resolution")
    assert (resolution["state"], resolution["evidence"]) == ("succeeded", [observation["observation_id"]])
    assert attempt["dispatch_state"] == "sent_no_response"


def test_unresolvable_name_is_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS: the name does not resolve (getaddrinfo fails, as it does offline), so nothing left."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "tickets.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    log = create(tmp_path, "http://tickets.invalid:8080", "requests")
    assert only(log, "attempt")[0]["dispatch_state"] == "not_sent"


def test_connect_timeout_is_not_sent(tmp_path: Path) -> None:
    """A listener whose accept queue is full drops the SYN: the connect times out, nothing left."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue (backlog 0 still queues one or two)
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                fillers.append(s)
            with instrument(env=harness_env(tmp_path, f"http://127.0.0.1:{port}")) as audit, \
                    audit.operation(INTENT):
                with pytest.raises(requests.ConnectionError):
                    requests.post(f"http://127.0.0.1:{port}/tickets", json={}, timeout=(0.3, 0.3))
        finally:
            for s in fillers:
                s.close()
    [attempt] = only(events(tmp_path), "attempt")
    if "ConnectTimeout" not in attempt["error"]:
        pytest.skip(f"this kernel did not drop the SYN: {attempt['error']}")
    assert attempt["dispatch_state"] == "not_sent"
