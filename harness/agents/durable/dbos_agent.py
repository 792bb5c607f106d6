"""An agent whose writes are DBOS steps: one workflow per intent, its write one step, on DBOS with a SQLite system
database (offline). What reruns a step is DBOS's own machinery: a step retry (``retries_allowed``) after it raised,
or the recovery of a pending workflow when a restarted process launches DBOS; what makes the rerun safe or a
duplicate is the step's key.

    python -m harness.agents.durable.dbos_agent            # retries allowed, a key derived from the workflow and step
    python -m harness.agents.durable.dbos_agent --default  # DBOS's default: retries_allowed=False
    python -m harness.agents.durable.dbos_agent --wrong    # retries allowed, a key minted by each run of the step

The agent's process chooses each workflow's id and logs its operation before anything runs (the operation is
derived from the workflow id and the step's name), then starts an executor: a process of its own that launches
DBOS on the state dir's SQLite file and runs the workflows. The step's process is the one that holds the
connection, so ``kill_sender_after_commit`` kills the executor; the agent starts it again, as a process manager
would, and DBOS recovers the pending workflow at launch and runs its step again (whatever ``retries_allowed``
says: the step never checkpointed its output). A run of the step that finds its operation's last attempt without an
outcome logs it ``sent_no_response`` (its fate is unknown to the rerun); a rerun is an attempt with
``retry_reason: step_retry``. The step raises on no answer or a 5xx, which DBOS retries only with
``retries_allowed``; by default the workflow ends in error and the agent resolves the operation ``unknown``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.agents.durable.runs import MAX_RUNS, resolve_answered, resolve_unknown, run_once
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV
from harness.recorder import Recorder

ENGINE = "dbos"  # its runs' folder (and the SQLite file's) in the state dir
MODULE = "harness.agents.durable.dbos_agent"
STEP = "send_write"  # the step's name: with the workflow id, the identity its operation and key derive from
EXECUTOR_TIMEOUT = 60.0  # seconds one executor may take for every workflow, recovery included
MAX_STARTS = 3  # executors the agent starts before it gives up on the workflows left pending
RETRY_INTERVAL = 0.2  # seconds between step retries (DBOS: 1 s, doubled each time): a latency knob only


def operation_id_of(workflow_id: str) -> str:
    """The operation of a workflow's write step: one step identity, one operation, whichever run of it acts."""
    return "op_" + uuid.uuid5(uuid.NAMESPACE_URL, f"dbos-step:{workflow_id}/{STEP}").hex[:12]


def derived_key(op_id: str) -> str:
    return "key_" + op_id.removeprefix("op_")


class StepFailed(Exception):
    """The write got no answer or a 5xx: it may have acted. Raised so DBOS decides whether the step runs again."""


# -- the executor: DBOS launched on the state dir's SQLite file, the workflows run (or recovered) ---------------

def write_step(mode: str) -> Callable[..., dict[str, Any]]:
    """The write's step body, for ``@DBOS.step(name=STEP)``: one run's attempt of the workflow's operation (or of
    ``op_id``, one the caller derived from its workflow), its key derived from the operation (minted by each run
    under --wrong); it raises on no answer or a 5xx."""
    from dbos import DBOS

    def send_write(intent: dict[str, Any], contract: dict[str, Any], op_id: str | None = None) -> dict[str, Any]:
        if op_id is None:  # the operation of the step's own workflow
            assert DBOS.workflow_id is not None, "a step runs in a workflow"
            op_id = operation_id_of(DBOS.workflow_id)
        # the flaw of --wrong: a key minted in the step body, new on every run of it
        key = ("key_" + uuid.uuid4().hex[:16]) if mode == "wrong" else derived_key(op_id)
        got = run_once(ENGINE, op_id, intent, contract, key=key, worker=f"dbos-{os.getpid()}", reason="step_retry",
                       rerun_by="DBOS ran the step again",
                       decision="the same key: the destination deduplicates it" if mode != "wrong"
                       else "run again by DBOS")
        if got.status is None or got.status >= 500:
            raise StepFailed(f"{got.attempt_id}: {got.status or 'no answer'}")
        return {"attempt_id": got.attempt_id, "status": got.status, "effect_refs": got.effect_refs}

    return send_write


def step_config(mode: str) -> dict[str, Any]:
    """The write step's DBOS settings: the mode's ``retries_allowed``, the rest DBOS's but the interval."""
    return {"retries_allowed": mode != "default", "max_attempts": MAX_RUNS, "interval_seconds": RETRY_INTERVAL,
            "backoff_rate": 1.0}


def start_dbos() -> None:
    """DBOS on the state dir's SQLite file (launched by the caller once its workflows are registered: the launch
    recovers the workflows a dead executor left pending)."""
    from dbos import DBOS

    folder = Path(os.environ[STATE_DIR_ENV]) / ENGINE
    folder.mkdir(parents=True, exist_ok=True)
    DBOS(config={"name": "harness_durable", "system_database_url": f"sqlite:///{folder / 'system.sqlite'}",
                 "log_level": "WARNING"})


def launch(mode: str) -> Launched:
    """DBOS with a workflow per intent whose write is one step, launched."""
    from dbos import DBOS

    start_dbos()
    send_write = DBOS.step(name=STEP, **step_config(mode))(write_step(mode))

    @DBOS.workflow(name="carry_out")
    def carry_out(intent: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
        return send_write(intent, contract)

    DBOS.launch()
    return Launched(lambda _, intent, contract: DBOS.start_workflow(carry_out, intent, contract), lambda got: got)


@dataclass(frozen=True)
class Launched:
    """A launched DBOS app: how a workflow is started for an intent (its id given and SetWorkflowID set), and what
    its result says (the write step's: attempt_id, status, effect_refs)."""

    start: Callable[[str, dict[str, Any], dict[str, Any]], Any]
    result: Callable[[Any], dict[str, Any]]


def execute(launched: Launched, plan: dict[str, Any]) -> dict[str, Any]:
    """Every planned workflow's result: each started unless DBOS already knows it (a restarted executor's launch
    recovered it), then awaited. A workflow that ended in error is ``{"error": ...}``."""
    from dbos import DBOS, SetWorkflowID

    results: dict[str, Any] = {}
    try:
        handles: dict[str, Any] = {}
        for workflow_id, (intent, contract) in plan.items():
            if DBOS.get_workflow_status(workflow_id) is not None:
                handles[workflow_id] = DBOS.retrieve_workflow(workflow_id)
            else:
                with SetWorkflowID(workflow_id):
                    handles[workflow_id] = launched.start(workflow_id, intent, contract)
        for workflow_id, handle in handles.items():
            try:
                results[workflow_id] = launched.result(handle.get_result())
            except Exception as exc:  # noqa: BLE001 - the workflow's error is its result here
                results[workflow_id] = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=1)
    return results


# -- the agent's process: the operations, the executor (started again when it died), the resolutions ----------

def main(argv: list[str] | None = None, *, description: str | None = __doc__, module: str = MODULE,
         launcher: Callable[[str], Launched] = launch) -> int:
    """The agent (or, with --executor, its executor): ``launcher`` makes the DBOS app whose workflows run."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--default", action="store_true", help="DBOS's default: the step is not retried")
    group.add_argument("--wrong", action="store_true", help="retries allowed, a key minted by each run of the step")
    parser.add_argument("--executor", action="store_true", help=argparse.SUPPRESS)  # the agent's child process
    args = parser.parse_args(argv)
    mode = "default" if args.default else "wrong" if args.wrong else "safe"
    folder = Path(os.environ[STATE_DIR_ENV]) / ENGINE
    if args.executor:
        plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
        (folder / "results.json").write_text(json.dumps(execute(launcher(mode), plan)), encoding="utf-8")
        return 0
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        doc = json.load(f)
    folder.mkdir(parents=True, exist_ok=True)
    plan = {}
    with Recorder(os.environ[AUDIT_LOG_ENV]) as recorder:
        for intent in doc["intents"]:
            workflow_id = "wf_" + uuid.uuid4().hex[:12]
            op_id = operation_id_of(workflow_id)
            recorder.operation(op_id, intent_id=intent["intent_id"],
                               intent={k: intent[k] for k in ("kind", "destination", "params")},
                               idempotency_key=derived_key(op_id))
            plan[workflow_id] = (intent, doc["destinations"][intent["destination"]])
        (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        ended = run_executor(folder, [module, *(argv if argv is not None else sys.argv[1:]), "--executor"])
        results = json.loads((folder / "results.json").read_text(encoding="utf-8")) if ended else {}
        for workflow_id, (intent, _) in plan.items():
            resolve(recorder, intent, operation_id_of(workflow_id), results.get(workflow_id), ended)
    return 0


def run_executor(folder: Path, argv: list[str]) -> str | None:
    """Run the executor until it exits by itself, starting it again after it died (a signal): what a process
    manager does, and what has DBOS recover its pending workflows. None when it never finished."""
    with open(folder / "executor.log", "ab") as log:
        for start in range(1, MAX_STARTS + 1):
            executor = subprocess.Popen([sys.executable, "-m", *argv], stdout=log, stderr=subprocess.STDOUT)
            try:
                code = executor.wait(EXECUTOR_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"the executor did not finish within {EXECUTOR_TIMEOUT:.0f} s", flush=True)
                return None
            finally:  # never left running: timed out, or the agent interrupted
                if executor.poll() is None:
                    executor.kill()
                    executor.wait(5)
            if code == 0:
                return f"executor {start}"
            print(f"executor {start} (pid {executor.pid}) ended with {code}", flush=True)
            if code > 0:  # it failed by itself, not killed: starting it again would fail the same way
                return None
    return None


def resolve(recorder: Recorder, intent: dict[str, Any], op_id: str, result: dict[str, Any] | None,
            ended: str | None) -> None:
    """The operation's resolution from its workflow's result: succeeded on a 2xx (not 202), else unknown (a step
    that failed after its write may have committed: left to reconciliation)."""
    if result is None or "error" in result:
        why = result["error"] if result else "no executor finished the workflow (its log: executor.log)"
        resolve_unknown(recorder, ENGINE, op_id, then="nobody ran the step again",
                        reason=f"the workflow ended without a success ({why}): its step may have committed; left "
                               "to reconciliation")
        print(f"{intent['intent_id']}: unknown ({why})", flush=True)
        return
    state = resolve_answered(recorder, op_id, result, f"the workflow's step ({ended})")
    print(f"{intent['intent_id']}: {state} {result['effect_refs']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
