"""An agent in a container: one run of a ``ContainerAgent`` (a scenario's ``agent: {image, command, env}``, or
``--agent-image``), with the same ``AgentRun`` as ``harness.agent_process.run_agent`` gives a process, so the
engine has one path whichever runs.

The container is the agent's confinement, as bubblewrap is a process agent's (``harness.sandbox``; docs/contract.md,
the trust model). Each run is a new container of the image (a restart after a planned crash is a new container on
the same state dir):

- **Its first process is Docker's init over ``sleep infinity``**, which only the harness ends; the agent's command
  runs beside it (an exec, as the harness's uid:gid). So when the agent's own process exits, its PID namespace
  lives on: what it left running gets ``LATE_WINDOW_SECONDS`` (what that sends is on the wire after the exit: H062),
  then the container is killed, and every process in it dies with its init, ``setsid`` and double fork included.
  One still running then is said in ``AgentRun.survivors`` (the run is INCOMPLETE), as in the sandbox. The image
  needs a ``sleep`` (coreutils' or busybox's).
- **Files**: the image read-only, a private ``/tmp``; the contract's audit log, trace file and state dir bound
  read-write and its intents file (and the proxy's CA certificate) read-only, each at its own path, so the
  contract's environment holds inside as it is: nothing else of the evidence folder (the harness's files, the
  journal, other runs) nor of the host is there.
- **Privileges**: the harness's uid:gid, no capabilities, no new privileges, at most ``AGENT_PIDS_LIMIT`` processes.
- **Network**: the host's (``127.0.0.1`` is the proxy's), or ``isolated``: the container's own loopback alone
  (network ``none``), where ``harness.containers.relay`` carries the contract's ports to the host's.
- The container's id is told to the destinations (``on_start``): what its processes send past the proxy is the
  agent's (``fake_destinations.peer``), though they descend from the engine, not from the harness.

The environment is the image's, the sandbox's scratch folders (``harness.sandbox.SCRATCH_ENV``), the agent's
``env``, then the contract's (the contract wins); the harness's own environment never reaches it.

- Time limit: past ``timeout`` the agent's processes get SIGTERM (where the harness sees the host's processes),
  then the container is killed after the grace.
- Planned crash: ``kill_when()`` turns true, the container is killed and removed in one call, which the engine
  answers once it has stopped (its init dead, so every process in its PID namespace), else ``AgentError``; only
  then does the run return and the restart begin.
- stdout and stderr are appended to the evidence folder's agent.stdout and agent.stderr as the agent writes them.
- The container is removed after every run, whatever ended it: exit, timeout, crash, an exception or Ctrl-C in the
  harness (``finally``). A harness killed outright leaves it to the reaper (``harness.containers.docker_client``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fake_destinations.peer import in_container
from harness.agent_process import KILL_GRACE_SECONDS, LATE_WINDOW_SECONDS, contract_places, log_size, outlived
from harness.containers.docker_client import engine_message
from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, OPERATOR_ENV
from harness.errors import AgentError, ContainerError
from harness.results.scenario_result import AgentRun
from harness.safe_files import open_append
from harness.sandbox import AGENT_PIDS_LIMIT, SCRATCH_ENV

if TYPE_CHECKING:
    from docker.models.containers import Container

    from harness.scenario import ContainerAgent

ROLE = "agent"
GONE_SECONDS = 10.0  # how long the engine may take to say a process started or ended, or the container is up
POLL_SECONDS = 0.02  # how often kill_when() is asked, as the process runner asks it
HOLD = ["sleep", "infinity"]  # the container's life, under Docker's init: the harness ends it, not the agent's exit


def confinement(network: str) -> str:
    """What a container run vouches for, said in the verdict (docs/contract.md, the trust model)."""
    reach = "host (loopback shared)" if network == "host" else "isolated (the fault proxy and the SSH hosts only)"
    return (f"container (Docker): own PID namespace; writable: the agent's log, trace and state dir only, and a "
            f"private /tmp (the image read-only); the harness's files and the rest of the evidence folder out of "
            f"sight; the harness's uid:gid, no capabilities, no new privileges, at most {AGENT_PIDS_LIMIT} processes; "
            f"what it leaves running gets {LATE_WINDOW_SECONDS:g} s after it exits, then dies with the container; "
            f"network {reach}")


def run_container_agent(agent: ContainerAgent, env: Mapping[str, str], *, timeout: float, stdout: Path,
                        stderr: Path, kill_when: Callable[[], bool] | None = None, readable: Sequence[Path] = (),
                        run: str | None = None, on_start: Callable[[list[str]], None] | None = None) -> AgentRun:
    """Run the agent in a container of its image to its end (then the late window), or until ``timeout``
    (stopped), or until ``kill_when()`` turns true (killed, and verified gone). ``readable``: files bound
    read-only beside the intents file (the proxy's CA certificate); ``run``: the run label (default: the audit
    log's folder's name); ``on_start``: told the container's id once it runs, before the agent starts."""
    from docker.types.services import Mount

    from harness.containers import docker_client

    environment = SCRATCH_ENV | {k: v for k, v in agent.env.items() if k not in OPERATOR_ENV} | dict(env)
    run = run or Path(env.get(AUDIT_LOG_ENV, "agent")).parent.name
    intents = [Path(env[INTENTS_ENV])] if env.get(INTENTS_ENV) and os.path.exists(env[INTENTS_ENV]) else []
    name = _container_name(run)
    user = f"{os.getuid()}:{os.getgid()}"
    started_at, start = time.time(), time.monotonic()
    with contract_places(env) as writable:
        # Mount objects, not "path:path:mode" strings: a folder name may hold a colon
        binds = [Mount(str(p), str(p), type="bind", read_only=False) for p in writable] + \
                [Mount(str(p), str(p), type="bind", read_only=True) for p in dict.fromkeys([*intents, *readable])]
        try:
            container = docker_client.start(
                agent.image, role=ROLE, run=run, name=name, entrypoint=HOLD, command=[], environment=environment,
                mounts=binds, network_mode="none" if agent.network == "isolated" else "host", user=user, init=True,
                read_only=True, tmpfs={"/tmp": "rw,exec,nosuid,nodev,mode=1777"}, cap_drop=["ALL"],
                security_opt=["no-new-privileges"], pids_limit=AGENT_PIDS_LIMIT, stdin_open=False, tty=False)
        except BaseException:  # Ctrl-C between the engine's create and start: the container has a name, not a handle
            _remove_named(name)
            raise
        relay = output = main = None
        try:
            held = _held(container, agent.image)
            if agent.network == "isolated":
                relay = _relay(container, env)
            if on_start is not None:
                on_start([container.id])
            main = _Exec(container, _command(agent), user, agent.image)
            output = _copy(main.output, stdout, stderr)
            end = _wait(container, main, held, start, timeout, kill_when)
        finally:
            try:
                if relay is not None:
                    relay.close()
            finally:
                docker_client.remove(container)
                if main is not None:
                    main.close()
                if output is not None:
                    output.join(GONE_SECONDS)  # the stream ends with the container: agent.stdout is whole
    return AgentRun(agent.label, end.status, end.timed_out, end.killed, time.monotonic() - start, started_at,
                    time.time(), log_size(env), container=name, sandbox=confinement(agent.network),
                    exited_at=end.exited_at, left_running=end.left, survivors=outlived(end.outlived))


class _End:
    """How one container run ended: its status (None when killed or timed out), and after an exit, when it
    exited, how many processes it left running and how many of those outlived the late window."""

    def __init__(self, *, status: int | None = None, timed_out: bool = False, killed: bool = False,
                 exited_at: float | None = None, left: int | None = None, outlived: int = 0) -> None:
        self.status, self.timed_out, self.killed = status, timed_out, killed
        self.exited_at, self.left, self.outlived = exited_at, left, outlived


def _wait(container: Container, main: _Exec, held: set[int], start: float, timeout: float,
          kill_when: Callable[[], bool] | None) -> _End:
    """Until the agent's own process ends (then the late window), the time limit or the planned crash; the
    container is gone before this returns."""
    while not main.ended(POLL_SECONDS if kill_when else min(1.0, max(0.0, timeout - (time.monotonic() - start)))):
        if kill_when is not None and kill_when():
            _end(container)  # a planned crash restarts the agent only once it is gone
            return _End(killed=True)
        if time.monotonic() - start >= timeout:
            if _signal(container, held, signal.SIGTERM):
                main.ended(KILL_GRACE_SECONDS)
            _end(container)
            return _End(timed_out=True)
    exited_at = time.time()
    left = len(_others(container, held))
    remaining = left
    deadline = time.monotonic() + LATE_WINDOW_SECONDS
    while remaining and time.monotonic() < deadline:  # what it left may still send: the wire is watched meanwhile
        time.sleep(POLL_SECONDS * 2)
        remaining = len(_others(container, held))
    if remaining:  # killed before whatever it was waiting to do; its output closes with it, and the engine then
        _kill(container)  # records the agent's status
    status = main.status()  # asked before the removal, which forgets the exec
    _end(container)
    return _End(status=status, exited_at=exited_at, left=left, outlived=remaining)


def _command(agent: ContainerAgent) -> list[str]:
    """What ``docker run`` would run: the image's entry point, then the agent's command or the image's own."""
    from harness.containers import docker_client

    config = docker_client.client().images.get(agent.image).attrs.get("Config") or {}
    words = [*(config.get("Entrypoint") or []), *(agent.argv if agent.argv is not None else config.get("Cmd") or [])]
    if not words:
        raise ContainerError(f"image {agent.image} has no command of its own and the agent names none")
    return words


class _Exec:
    """The agent's own process: an exec in the container, its output streamed. Its end is seen through a pidfd
    of its host process where the harness shares the host's /proc (the moment it exits); else from the engine,
    which says an exec ended only once its output is closed (up to 2 s later while a process the agent left
    running holds it open)."""

    def __init__(self, container: Container, argv: list[str], user: str, image: str) -> None:
        import docker.errors

        from harness.containers import docker_client

        self.api = docker_client.client().api
        self.pidfd: int | None = None
        try:
            self.id = self.api.exec_create(container.id, argv, stdout=True, stderr=True, stdin=False, tty=False,
                                           user=user)["Id"]
            self.output: Iterator[tuple[bytes | None, bytes | None]] = self.api.exec_start(
                self.id, stream=True, demux=True)
        except docker.errors.APIError as exc:
            raise ContainerError(f"cannot run the agent in container {container.name}: {engine_message(exc)}") \
                from None
        state = self._started()
        pid = state.get("Pid")
        if not pid and state.get("ExitCode") is not None:  # never ran (no such program): as a process agent's start
            said = b"".join(out or err or b"" for out, err in self.output).decode(errors="replace").strip()
            raise AgentError(f"cannot start agent {argv[0]!r} in image {image}: "
                             f"{said or 'exit status ' + str(state['ExitCode'])}")
        if isinstance(pid, int) and pid > 0:
            self.pidfd = _pidfd(pid, container.id)

    def _inspect(self) -> dict[str, Any]:
        return dict(self.api.exec_inspect(self.id))

    def _started(self) -> dict[str, Any]:
        """The exec once the engine has started its process, or said it could not (it answers the start first)."""
        deadline = time.monotonic() + GONE_SECONDS
        while (state := self._inspect()).get("Pid", 0) == 0 and state.get("ExitCode") is None:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        return state

    def ended(self, seconds: float) -> bool:
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], seconds)[0])
        deadline = time.monotonic() + seconds
        while True:
            if self._inspect().get("ExitCode") is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def status(self) -> int | None:
        """The agent's exit status as the engine recorded it, once its output is closed."""
        deadline = time.monotonic() + GONE_SECONDS
        while (code := self._inspect().get("ExitCode")) is None and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        return code if isinstance(code, int) else None


def _pidfd(pid: int, container_id: str) -> int | None:
    """A pidfd of host process ``pid`` if it is the container's, else None (gone already, or the harness runs in a
    container of its own and its /proc is not the host's: ``pid`` is another process there)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not in_container(pid, [container_id]):
        os.close(fd)
        return None
    return fd


def _copy(output: Iterator[tuple[bytes | None, bytes | None]], stdout: Path, stderr: Path) -> threading.Thread:
    """The agent's stdout and stderr appended to the evidence folder's files as they come, in a thread that ends
    with the stream (when the container goes, at the latest)."""

    def copy() -> None:
        with open_append(stdout) as out, open_append(stderr) as err:  # whatever the agent left there, replaced
            try:
                for said, complained in output:
                    if said:
                        out.write(said)
                    if complained:
                        err.write(complained)
            except Exception as exc:  # noqa: BLE001 - the stream broke: say so where the output goes
                err.write(f"[the harness could not read the agent's output: {exc}]\n".encode())

    thread = threading.Thread(target=copy, name="agent-output", daemon=True)
    thread.start()
    return thread


def _held(container: Container, image: str) -> set[int]:
    """The container's own processes before the agent runs (Docker's init and the sleep it holds), once both
    run; a container that ends instead is an error naming what its image lacks."""
    deadline = time.monotonic() + GONE_SECONDS
    while len(pids := _running(container)) < 2:
        container.reload()
        if container.status != "running" or time.monotonic() >= deadline:
            tail = container.logs(tail=5).decode(errors="replace").strip()
            raise ContainerError(f"the agent's container of image {image} does not stay up before the agent starts "
                                 f"(the harness holds it with `{' '.join(HOLD)}`: the image needs a sleep, coreutils' "
                                 f"or busybox's); status {container.status}; its log: {tail or '(empty)'}")
        time.sleep(0.005)
    return pids


def _running(container: Container) -> set[int]:
    """The host pids of the container's live processes (a zombie holds nothing and does nothing), as the engine
    lists them (its cgroup); none once it has stopped."""
    import docker.errors

    try:
        rows = container.top(ps_args="-o pid,stat").get("Processes") or []
    except docker.errors.APIError:
        return set()
    return {int(row[0]) for row in rows if len(row) > 1 and not row[1].startswith(("Z", "X"))}


def _others(container: Container, held: set[int]) -> set[int]:
    return _running(container) - held


def _signal(container: Container, held: set[int], sig: int) -> bool:
    """``sig`` to every process of the agent's, where the harness sees the host's processes (checked by their
    cgroup: a pid of another namespace is never signalled); whether any was."""
    sent = False
    for pid in _others(container, held):
        if in_container(pid, [container.id]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                sent = True
    return sent


def _relay(container: Container, env: Mapping[str, str]) -> Any:
    """The isolated network's relay: the contract's loopback ports, listened on inside the container's own
    network (``network_mode: none``), carried to the host's (``harness.containers.relay``)."""
    from harness.containers.relay import Relay, loopback_ports

    pid = container.attrs.get("State", {}).get("Pid")
    if not isinstance(pid, int) or pid <= 0:
        raise AgentError(f"the agent's container {container.name} reports no process to join")
    return Relay().start(pid, loopback_ports(env))


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


def _kill(container: Container) -> None:
    import docker.errors

    try:
        container.kill()  # SIGKILL to the container's init: the PID namespace, and every process in it, dies
    except docker.errors.APIError as exc:
        if exc.status_code not in (404, 409):  # gone or no longer running: what the kill is for
            raise AgentError(f"cannot kill agent container {container.name}: {engine_message(exc)}") from None


def _end(container: Container) -> None:
    """Kill and remove the container, one call to the engine, which answers once it has stopped: the PID
    namespace's init is dead then, and the kernel has ended every process in it. Else ``AgentError``: a restart
    beside a live agent is not the crash a scenario declares."""
    import docker.errors
    import requests.exceptions

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        return
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise AgentError(f"the agent container {container.name} could not be killed and removed: "
                         f"{engine_message(exc)}") from None
