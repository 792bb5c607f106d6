"""An agent in a container: one run of a ``ContainerAgent`` (a scenario's ``agent: {image, command, env}``, or
``--agent-image``), with the same ``AgentRun`` as ``harness.agent_process.run_agent`` gives a process, so the
engine has one path whichever runs.

Each run is a new container of the image (a restart after a planned crash is a new container on the same
state dir), on the host's network (the proxy's and the destinations' ports are ``127.0.0.1``), as the
harness's own user (what it writes in the evidence folder stays the harness's), with the evidence folder (and
in the ``-https`` proxy modes the CA's folder, read-only) mounted at the same absolute paths: the contract's
environment holds inside as it is. The container's environment is the image's, the agent's ``env`` and the
contract's on top (the contract wins); the harness's own environment (its operator's settings) never reaches it.

- Time limit: past ``timeout`` the container is stopped (SIGTERM to its init, SIGKILL after the grace).
- Planned crash: ``kill_when()`` turns true, the container is SIGKILLed, then VERIFIED gone: the engine says
  it exited and holds no process (a PID namespace dies with its init, so nothing of the agent can outlive
  it), else ``AgentError``; only then does the run return and the restart begin.
- stdout and stderr (``container.logs``) are appended to the evidence folder's agent.stdout and agent.stderr.
- The container is removed after every run, whatever ended it: exit, timeout, crash, an exception or Ctrl-C
  in the harness (``finally``). A harness killed outright leaves it to the reaper
  (``harness.containers.docker_client``).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.agent_process import KILL_GRACE_SECONDS, log_size
from harness.containers.docker_client import engine_message
from harness.contract import AUDIT_LOG_ENV, OPERATOR_ENV
from harness.errors import AgentError
from harness.results.scenario_result import AgentRun
from harness.safe_files import open_append

if TYPE_CHECKING:
    from docker.models.containers import Container

    from harness.containers.relay import Relay
    from harness.scenario import ContainerAgent

ROLE = "agent"
GONE_SECONDS = 10.0  # how long the engine may take to report a SIGKILLed container exited
POLL_SECONDS = 0.02  # how often kill_when() is asked, as the process runner asks it


def run_container_agent(agent: ContainerAgent, env: Mapping[str, str], *, timeout: float, stdout: Path,
                        stderr: Path, kill_when: Callable[[], bool] | None = None, mounts: Sequence[Path] = (),
                        run: str | None = None) -> AgentRun:
    """Run the agent's container to its end, or until ``timeout`` (stopped), or until ``kill_when()`` turns true
    (killed, and verified gone). ``mounts``: folders bound at their own paths, the first read-write (the
    evidence folder), the others read-only; ``run``: the run label (default: the audit log's folder's name)."""
    from harness.containers import docker_client

    environment = {k: v for k, v in agent.env.items() if k not in OPERATOR_ENV} | dict(env)
    run = run or Path(env.get(AUDIT_LOG_ENV, "agent")).parent.name
    from docker.types.services import Mount

    # Mount objects, not "path:path:mode" strings: a folder name may hold a colon
    binds = [Mount(str(path), str(path), type="bind", read_only=i > 0)
             for i, path in enumerate(dict.fromkeys(Path(p).resolve() for p in mounts))]
    name = _container_name(run)
    started_at, start = time.time(), time.monotonic()
    network, holder, relay = "host", None, None
    if agent.network == "isolated":
        holder, relay = _isolated_network(agent.image, run, name, environment)
        network = f"container:{holder.id}"
    try:
        container = docker_client.start(agent.image, role=ROLE, run=run, name=name, command=agent.argv,
                                 environment=environment, mounts=binds, network_mode=network,
                                 user=f"{os.getuid()}:{os.getgid()}", init=True, stdin_open=False, tty=False)
    except BaseException:  # Ctrl-C between the engine's create and start: the container has a name, not a handle
        _remove_named(name)
        _end_isolation(holder, relay)
        raise
    timed_out = killed = False
    exit_status: int | None = None
    try:
        waiter = _Waiter(container, timeout + GONE_SECONDS)
        while not waiter.done.wait(POLL_SECONDS if kill_when else max(0.0, timeout - (time.monotonic() - start))):
            if kill_when is not None and kill_when():
                _kill(container)
                killed = True
                break
            if time.monotonic() - start >= timeout:
                _stop(container)
                timed_out = True
                break
        _verify_gone(container, waiter, agent.image)  # a planned crash restarts the agent only once it is gone
        if not (killed or timed_out):
            exit_status = waiter.status
    finally:
        try:
            _collect_logs(container, stdout, stderr)
        finally:
            docker_client.remove(container)
            _end_isolation(holder, relay)
    # what the verdict can vouch for (docs/contract.md, the trust model): Docker's PID namespace, but the whole
    # evidence folder bound read-write and no late window yet (issue 44: narrowing them is open)
    confined = (f"container: own PID namespace (Docker), network {agent.network}; the evidence folder writable "
                "whole, what the agent left running killed with it at once")
    return AgentRun(agent.label, exit_status, timed_out, killed, time.monotonic() - start, started_at, time.time(),
                    log_size(env), container=name, sandbox=confined)


def _isolated_network(image: str, run: str, name: str, env: Mapping[str, str]) -> tuple[Container, Relay]:
    """A holder container with a network of its own (loopback only), and the relay that carries the agent's
    contract addresses in it to the host's loopback (``harness.containers.relay``); the agent joins it."""
    from harness.containers import docker_client
    from harness.containers.relay import Relay, loopback_ports

    holder = docker_client.start(image, role=ROLE, run=run, name=name + "-net", network_mode="none", init=True,
                          command=["sleep", "infinity"], stdin_open=False, tty=False)
    try:
        pid = holder.attrs.get("State", {}).get("Pid")
        if not isinstance(pid, int) or pid <= 0:
            raise AgentError(f"the agent's network holder {holder.name} reports no process to join")
        return holder, Relay().start(pid, loopback_ports(env))
    except BaseException:
        docker_client.remove(holder)
        raise


def _end_isolation(holder: Container | None, relay: Relay | None) -> None:
    from harness.containers import docker_client

    if relay is not None:
        relay.close()
    if holder is not None:
        docker_client.remove(holder)


def _remove_named(name: str) -> None:
    import docker.errors

    from harness.containers import docker_client

    try:
        docker_client.remove(docker_client.client().containers.get(name))
    except (docker.errors.DockerException, OSError):
        pass  # never made, or the engine unreachable: the reaper removes what is left when the harness ends


def _container_name(run: str) -> str:
    """``rh-agent-RUN-xxxxxx``: ours at a glance in ``docker ps``, one per run of the agent (a restart's too)."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in run)[:80] or "run"
    return f"rh-agent-{safe}-{secrets.token_hex(3)}"


class _Waiter:
    """``container.wait()`` in a thread of its own, so the run can ask ``kill_when()`` meanwhile; ``status``
    is the exit status once ``done`` is set (None when the engine did not say)."""

    def __init__(self, container: Container, limit: float) -> None:
        self.container = container
        self.limit = limit
        self.done = threading.Event()
        self.status: int | None = None
        self.error: str | None = None
        threading.Thread(target=self._wait, name=f"wait-{container.name}", daemon=True).start()

    def _wait(self) -> None:
        import docker.errors
        import requests.exceptions

        deadline = time.monotonic() + self.limit
        try:
            while True:
                try:
                    answer = self.container.wait(timeout=max(1.0, deadline - time.monotonic()))
                    code = answer.get("StatusCode")
                    self.status = code if isinstance(code, int) else None
                    return
                except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                    if time.monotonic() >= deadline:
                        self.error = "the Docker engine did not report the container's end"
                        return
                except docker.errors.NotFound:
                    self.error = "the container was removed before it ended"
                    return
                except docker.errors.APIError as exc:
                    self.error = f"the Docker engine's answer: {engine_message(exc)}"
                    return
        finally:
            self.done.set()


def _kill(container: Container) -> None:
    import docker.errors

    try:
        container.kill()  # SIGKILL to the container's init: the PID namespace, and every process in it, dies
    except docker.errors.APIError as exc:
        if exc.status_code not in (404, 409):  # gone or no longer running: what the kill is for
            raise AgentError(f"cannot kill agent container {container.name}: {engine_message(exc)}") from None


def _stop(container: Container) -> None:
    import docker.errors
    import requests.exceptions

    try:
        container.stop(timeout=int(KILL_GRACE_SECONDS))  # SIGTERM, then SIGKILL after the grace
    except (docker.errors.APIError, requests.exceptions.RequestException):
        _kill(container)


def _verify_gone(container: Container, waiter: _Waiter, image: str) -> None:
    """Wait for the engine to say the container ended, then look again: not running, no process. Else
    ``AgentError``: a restart beside a live agent is not the crash a scenario declares."""
    import docker.errors

    if not waiter.done.wait(GONE_SECONDS):
        _kill(container)
        waiter.done.wait(GONE_SECONDS)
    try:
        container.reload()
    except docker.errors.NotFound:
        return
    state: dict[str, Any] = container.attrs.get("State") or {}
    if state.get("Running") or state.get("Paused") or state.get("Restarting") or state.get("Pid"):
        raise AgentError(f"the agent container {container.name} ({image}) still runs after the harness killed it "
                         f"(state {state.get('Status')!r}, pid {state.get('Pid')}); "
                         f"{waiter.error or 'the engine did not stop it'}")


def _collect_logs(container: Container, stdout: Path, stderr: Path) -> None:
    """The container's stdout and stderr, appended to the evidence folder's files (as a process's are)."""
    import docker.errors

    for path, which in ((stdout, {"stdout": True, "stderr": False}), (stderr, {"stdout": False, "stderr": True})):
        with open_append(path) as out:  # the container could write the folder: whatever it left there, replaced
            try:
                for chunk in container.logs(stream=True, follow=False, **which):  # the container has ended
                    out.write(chunk)
            except docker.errors.APIError as exc:
                out.write(f"[the harness could not read the container's log: {engine_message(exc)}]\n".encode())
