"""An agent whose writes are Celery tasks on a real Redis broker: the agent's process enqueues one task per intent
and waits for it; a Celery worker (prefork, one child) runs it. What reruns a task after its worker died is
Celery's own redelivery; what makes the rerun safe or a duplicate is the task body's key.

    python -m harness.agents.durable.celery_agent            # acks_late, a key derived from the task id
    python -m harness.agents.durable.celery_agent --default  # Celery's defaults: acks on receipt
    python -m harness.agents.durable.celery_agent --wrong    # acks_late, a key minted by each run of the task

The agent starts Debian's ``redis-server`` (in its state dir, on a free port, nothing saved) and the worker, and
stops both before it exits. Each task is one operation: its id is derived from the task id, which the agent
chooses and logs before it enqueues (persisted before dispatch); the worker logs its attempts under it, as a
worker. A run of the task that finds an attempt of its operation in the log with no outcome is a redelivery:
the dead run's attempt is logged again as ``sent_no_response`` (its fate is unknown to the rerun) and the rerun is
an attempt with ``retry_reason: task_redelivered``. Under ``acks_late`` with ``task_reject_on_worker_lost`` a
worker child killed after the destination committed (``kill_sender_after_commit``) gets its task redelivered:
with the key derived from the task id the destination replays the first answer (one effect); with a key minted
per run it commits again. Under the defaults the task was acked before it ran: nobody reruns it, and the
agent resolves the operation ``unknown``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from harness.agents.durable.runs import resolve_answered, resolve_unknown, run_once
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV
from harness.recorder import Recorder

BROKER_ENV = "DURABLE_CELERY_BROKER"  # the worker's broker URL, set by the agent for its worker
MODE_ENV = "DURABLE_CELERY_MODE"  # safe | default | wrong
TASK_TIMEOUT = 20.0  # seconds the agent waits for one task, redelivery included
ENGINE = "celery"  # its runs' folder in the state dir
MODULE = "harness.agents.durable.celery_agent"  # as the worker imports it (this file may run as __main__)


def celery_app() -> Any:
    """The Celery app as the worker and the agent build it: the broker from the environment, the mode's acks."""
    from celery import Celery

    broker = os.environ.get(BROKER_ENV, "redis://127.0.0.1:6379/0")
    app = Celery("harness_durable", broker=broker, backend=broker)
    late = os.environ.get(MODE_ENV, "safe") != "default"
    # acks_late: ack after the task ran; reject_on_worker_lost: a child that died mid-task puts its message back
    # (without it, acks_late alone marks the task failed with WorkerLostError and acks it)
    app.conf.update(task_acks_late=late, task_reject_on_worker_lost=late, worker_prefetch_multiplier=1,
                    broker_connection_retry_on_startup=True, task_serializer="json", result_serializer="json",
                    worker_hijack_root_logger=False, result_expires=None,
                    # how long the pool waits on a dead child before WorkerLostError (10 s by default): a latency knob,
                    # the rerun is the same
                    worker_lost_wait=0.5)
    app.task(name="harness_durable.carry_out", bind=True)(carry_out)
    return app


def operation_id_of(task_id: str) -> str:
    """The operation of a task: one task identity, one operation, whichever run of it acts."""
    return "op_" + uuid.uuid5(uuid.NAMESPACE_URL, "celery-task:" + task_id).hex[:12]


def carry_out(task: Any, intent: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
    """One run of the task (the worker's): one attempt of the task's operation, with the engine's reason when an
    earlier run of the same task left an attempt."""
    mode = os.environ.get(MODE_ENV, "safe")
    op_id = operation_id_of(task.request.id)
    # the flaw of --wrong: a key minted in the task body, new on every run of it
    key = ("key_" + uuid.uuid4().hex[:16]) if mode == "wrong" else "key_" + op_id.removeprefix("op_")
    got = run_once(ENGINE, op_id, intent, contract, key=key, worker=f"celery-{os.getpid()}",
                   reason="task_redelivered", rerun_by="the task was redelivered",
                   decision="the same key: the destination deduplicates it" if mode != "wrong"
                   else "run again by the queue")
    return {"attempt_id": got.attempt_id, "status": got.status, "effect_refs": got.effect_refs}


# -- the agent's process: the broker, the worker, one task per intent -------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's redis-server on a free loopback port, nothing persisted; its URL once it answers."""
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("celery_agent: redis-server not found (Debian: apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"celery_agent: redis-server did not answer on port {port} within 10 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--default", action="store_true", help="Celery's defaults: the task is acked on receipt")
    group.add_argument("--wrong", action="store_true", help="acks_late, and a key minted by each run of the task")
    args = parser.parse_args(argv)
    mode = "default" if args.default else "wrong" if args.wrong else "safe"
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        doc = json.load(f)
    folder = Path(os.environ[STATE_DIR_ENV]) / "celery"
    folder.mkdir(parents=True, exist_ok=True)
    redis_server, broker = start_redis(folder)
    os.environ.update({BROKER_ENV: broker, MODE_ENV: mode})
    with open(folder / "worker.log", "ab") as log:
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", f"{MODULE}:app_for_worker", "worker",
                                   "--pool", "prefork", "--concurrency", "1", "--without-gossip", "--without-mingle",
                                   "--without-heartbeat", "--loglevel", "WARNING"],
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        with Recorder(os.environ[AUDIT_LOG_ENV]) as recorder:
            run_tasks(doc, recorder)
    finally:
        stop(worker)
        stop(redis_server)
    return 0


def run_tasks(doc: dict[str, Any], recorder: Recorder) -> None:
    """One task per intent: its operation logged before it is enqueued, resolved on what its last run got."""
    app = celery_app()
    for intent in doc["intents"]:
        task_id = "task_" + uuid.uuid4().hex[:12]
        op_id = operation_id_of(task_id)
        recorder.operation(op_id, intent_id=intent["intent_id"],
                           intent={k: intent[k] for k in ("kind", "destination", "params")},
                           idempotency_key="key_" + op_id.removeprefix("op_"))
        result = app.send_task("harness_durable.carry_out", args=[intent, doc["destinations"][intent["destination"]]],
                               task_id=task_id)
        try:
            got = result.get(timeout=TASK_TIMEOUT, propagate=True)
        except Exception as exc:  # noqa: BLE001 - the worker died and nobody reran it, or it failed: unknown
            resolve_unknown(recorder, ENGINE, op_id, then="nobody ran the task again",
                            reason=f"the task ended without an answer ({type(exc).__name__}): its worker may have "
                                   "committed before it died; left to reconciliation")
            print(f"{intent['intent_id']}: {type(exc).__name__}: {exc}", flush=True)
            continue
        state = resolve_answered(recorder, op_id, got, "the task's last run")
        print(f"{intent['intent_id']}: {state} {got['effect_refs']}", flush=True)


app_for_worker = celery_app() if os.environ.get(BROKER_ENV) else None  # `celery -A` reads it in the worker

if __name__ == "__main__":
    sys.exit(main())
