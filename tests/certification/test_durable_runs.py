"""One run of an engine's unit of work (harness/agents/durable/runs.py), against a real HTTP server on loopback: a
rerun after a run that died mid-dispatch logs the dead run's attempt as unknown and links to it with the engine's
reason, under the key its caller derived; the cap on runs holds."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.agents.durable.runs import MAX_RUNS, kept_runs, run_once
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV, destination_env_name

INTENT = {"intent_id": "i1", "kind": "create_payment", "destination": "payments", "params": {"amount": 5}}
CONTRACT = {"operations": {"create_payment": {"method": "POST", "path": "/payments"}},
            "idempotency": {"header": "Idempotency-Key"}}


class Payments(BaseHTTPRequestHandler):
    keys: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        Payments.keys.append(self.headers["Idempotency-Key"])
        body = json.dumps({"id": "pay_1"}).encode()
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def payments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Payments)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(destination_env_name("payments"), f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(AUDIT_LOG_ENV, str(tmp_path / "agent.ndjson"))
    Payments.keys = []
    yield tmp_path / "agent.ndjson"
    server.shutdown()
    server.server_close()
    thread.join(5)


def run():
    return run_once("engine", "op_1", INTENT, CONTRACT, key="key_1", worker="w", reason="step_retry",
                    decision="the same key", rerun_by="rerun")


def test_a_rerun_after_a_dead_run_logs_its_attempt_unknown_and_links_to_it(payments: Path) -> None:
    first = run()
    assert first.succeeded and first.effect_refs == ["pay_1"]
    # the first run as a process killed mid-dispatch leaves it: kept, no outcome
    kept = next((payments.parent / "state" / "engine" / "op_1").glob("*.json"))
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "outcome": None}))
    second = run()
    events = [json.loads(line) for line in payments.read_text().splitlines()]
    dead = [e for e in events if e["attempt_id"] == first.attempt_id]
    assert [e["dispatch_state"] for e in dead] == ["response_received", "sent_no_response"]
    rerun = next(e for e in events if e["attempt_id"] == second.attempt_id)
    assert (rerun["retry_of_attempt_id"], rerun["retry_reason"], rerun["attempt_number"]) == \
        (first.attempt_id, "step_retry", 2)
    assert Payments.keys == ["key_1", "key_1"]
    assert [(r["outcome"] or {}).get("http_status") for r in kept_runs("engine", "op_1")] == [None, 201]


def test_no_run_past_the_cap(payments: Path) -> None:
    for _ in range(MAX_RUNS):
        run()
    with pytest.raises(RuntimeError, match="not sending again"):
        run()
    assert len(Payments.keys) == MAX_RUNS
