"""What a connector tells its caller (certification/connectors/_harness.py: one ``harness-report:`` line per intent,
docs/contract.md "What the program told its caller"): every Python connector reports through the one helper, and
the helper reads the real exceptions of the SDKs and HTTP clients as their callers do: a timeout, no answer
(unknown), or an answer that said the write failed (error). The cells of certification/expected.yaml judge the
reports against the ledger (H049) through the real SDKs; these are the reading itself."""

from __future__ import annotations

import importlib.util
import re
import socket
import threading
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import requests
import urllib3

CONNECTORS = Path(__file__).resolve().parents[2] / "certification" / "connectors"


def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_harness", CONNECTORS / "_harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_python_connector_reports_what_its_sdk_returned_through_the_one_helper() -> None:
    scripts = sorted(p for p in CONNECTORS.glob("*.py") if p.name != "_harness.py")
    assert len(scripts) >= 20
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert re.search(r"^run(_tools)?\(", text, re.MULTILINE), f"{script.name}: not run through _harness"
        assert "harness-report" not in text, f"{script.name}: reports by itself, not through _harness.report"


def raised(call) -> BaseException:  # noqa: ANN001 - any callable
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the exception is what is read
        return exc
    raise AssertionError("it did not raise")


@pytest.fixture
def silent_port():
    """A loopback port that accepts a connection and never answers (the timeout), closed after the test."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def dropping_port():
    """A loopback port that reads each request and closes the connection with zero bytes (the answer lost, as the
    fault proxy loses it), stopped after the test."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    conn.recv(65536)
                except OSError:
                    pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_a_timeout_is_told_as_a_timeout_whichever_client_gave_up(silent_port: int) -> None:
    openai = pytest.importorskip("openai")  # the frameworks extra's (the certified release runs in the matrix)
    told = harness().told
    url = f"http://127.0.0.1:{silent_port}/orders"
    assert told(raised(lambda: requests.post(url, json={}, timeout=0.2))) == "timeout"
    assert told(raised(lambda: httpx.post(url, json={}, timeout=0.2))) == "timeout"
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(read=0.2))
    assert told(raised(lambda: pool.request("POST", url, json={}))) == "timeout"
    client = openai.OpenAI(api_key="sk-harness", base_url=f"http://127.0.0.1:{silent_port}/v1", timeout=0.2,
                           max_retries=0)
    assert told(raised(lambda: client.chat.completions.create(model="m", messages=[]))) == "timeout"
    assert told(TimeoutError("the MCP request timed out")) == "timeout"


def test_no_answer_is_told_unknown_through_the_wrapping_of_each_client(dropping_port: int) -> None:
    openai = pytest.importorskip("openai")
    told = harness().told
    url = f"http://127.0.0.1:{dropping_port}/orders"
    assert told(raised(lambda: requests.post(url, json={}, timeout=0.5))) == "unknown"
    assert told(raised(lambda: httpx.post(url, json={}, timeout=0.5))) == "unknown"
    # urllib3's MaxRetryError says what the last try ended with in its reason
    pool = urllib3.PoolManager(retries=urllib3.Retry(total=0), timeout=0.5)
    assert told(raised(lambda: pool.request("POST", url, json={}))) == "unknown"
    client = openai.OpenAI(api_key="sk-harness", base_url=f"http://127.0.0.1:{dropping_port}/v1", max_retries=0)
    assert told(raised(lambda: client.chat.completions.create(model="m", messages=[]))) == "unknown"


def test_an_answer_that_said_failed_is_an_error_unless_the_connector_knows_it_cannot_tell() -> None:
    openai = pytest.importorskip("openai")
    module = harness()
    answer = httpx.Response(500, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"),
                            json={"error": {"message": "boom"}})
    status = openai.InternalServerError("boom", response=answer, body=None)
    assert module.told(status) == "error"
    assert module.told(raised(answer.raise_for_status)) == "error"
    assert module.told(urllib3.exceptions.HTTPError("500: boom")) == "error"
    # a safe connector that knows a 5xx after a keyed write leaves the outcome open says so
    try:
        raise module.OutcomeUnknown("500 after a keyed write") from status
    except module.OutcomeUnknown as exc:
        assert module.told(exc) == "unknown"
    # an error raised while handling a lost answer is what the caller got: the answer, not the context
    try:
        try:
            raise ConnectionResetError("lost")
        except ConnectionResetError:
            raise RuntimeError("invalid answer") from None
    except RuntimeError as exc:
        assert module.told(exc) == "error"


def test_each_intent_reports_the_last_outcome_one_line_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    intents = tmp_path / "intents.json"
    intents.write_text('{"intents": [{"intent_id": "order-1", "destination": "orders", "params": {}}, '
                       '{"intent_id": "order-2", "destination": "orders", "params": {}}]}', encoding="utf-8")
    monkeypatch.setenv("HARNESS_INTENTS", str(intents))
    monkeypatch.setenv("HARNESS_DESTINATION_ORDERS", "http://127.0.0.1:1")
    answers = iter(["ord_0001", TimeoutError("late")])

    def create(url: str, params: dict) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    harness().run(create)
    reports = [line for line in capsys.readouterr().out.splitlines() if line.startswith("harness-report: ")]
    assert reports == ['harness-report: {"intent_id": "order-1", "outcome": "success", "effect_ref": "ord_0001"}',
                       'harness-report: {"intent_id": "order-2", "outcome": "timeout"}']
