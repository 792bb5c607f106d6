"""Runs the agent command under the harness contract, with a timeout and a clean teardown.

On Linux the agent runs in a bubblewrap sandbox (``harness.sandbox``): its own PID namespace, so a timeout,
a planned crash or its own exit takes down every process it started, ``setsid`` or not. Unsandboxed, it runs
in its own process group, killed whole; a process that left the group is still found by the contract
environment it inherited (``survivors``) and killed, and the run is then INCOMPLETE (``harness.checker.judge``).
Either way it is led by ``agent_supervisor``, which kills it when the harness disappears (even by SIGKILL),
so no agent outlives the harness. A command starting with `python` runs with the harness's own interpreter,
so that `--agent "python -m mypkg.agent"` sees the same virtual environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from harness import notices
from harness.contract import AUDIT_LOG_ENV, INTENTS_ENV, OPERATOR_ENV, STATE_DIR_ENV, TRACE_FILE_ENV, agent_words
from harness.errors import AgentError
from harness.results.scenario_result import AgentRun
from harness.safe_files import UnsafeFile, open_append, open_regular
from harness.sandbox import (
    SCRATCH_ENV,
    AgentFiles,
    Sandbox,
    bwrap_argv,
    choose_sandbox,
    command_paths,
    pids_ceiling,
)

SUPERVISOR = Path(__file__).with_name("agent_supervisor.py")  # run as a file: no package import
# How long what the agent left running may go on after it exited (the supervisor waits, then it is killed). Long
# enough for a background retry queued "right after" (a thread pool's next tick, a backoff of a few hundred ms)
# to reach the wire, where the checker finds it (H062); short, because a correct agent leaves nothing running
# and so never waits for it. What still runs then is killed and the run INCOMPLETE: it never got to act.
LATE_WINDOW_SECONDS = 0.75
KILL_GRACE_SECONDS = 2.0
STILL_RUNNING_EVERY = 10.0  # seconds between two "still running" notices while an agent works
GROUP_GONE_SECONDS = 5.0  # how long the harness waits for a SIGKILLed agent group to be reaped


def log_size(env: Mapping[str, str]) -> int:
    """The size of the audit log named in the contract environment ``env`` (0 while the agent wrote none)."""
    try:
        return os.stat(env[AUDIT_LOG_ENV]).st_size
    except (KeyError, OSError):
        return 0


def outlived(count: int) -> list[str]:
    """What ``AgentRun.survivors`` says of the ``count`` processes still running when the late window closed:
    killed then, before whatever they were waiting to do (the run is INCOMPLETE)."""
    return [f"{count} process(es) still running {LATE_WINDOW_SECONDS:g} s after the agent exited, killed then"] \
        if count else []


def argv_for(command: str) -> list[str]:
    """The argv of an agent command given as shell words; an AgentError when it cannot be one."""
    try:
        argv = agent_words(command)
    except ValueError as exc:
        raise AgentError(f"the agent command {command!r} {exc}") from None
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


# bubblewrap copies the host's mount table into the sandbox one mount at a time; a mount that goes away meanwhile (a
# container started or stopped by another process: an overlay under /var/lib/docker) fails the copy with EINVAL.
# The host changed under it, not the agent: the start is tried again, a few times.
MOUNT_RACE = b"Unable to apply mount flags"
SANDBOX_START_TRIES = 3


def run_agent(command: str, env: Mapping[str, str], *, timeout: float, stdout: Path, stderr: Path,
              cwd: Path | None = None, kill_when: Callable[[], bool] | None = None, sandbox: Sandbox | None = None,
              hidden: Sequence[Path] = (), readable: Sequence[Path] = ()) -> AgentRun:
    """``_run_agent``, its start tried again when the sandbox failed to copy a mount that went away meanwhile."""
    for tries_left in range(SANDBOX_START_TRIES - 1, -1, -1):
        said = stderr.stat().st_size if stderr.exists() else 0
        try:
            return _run_agent(command, env, timeout=timeout, stdout=stdout, stderr=stderr, cwd=cwd,
                              kill_when=kill_when, sandbox=sandbox, hidden=hidden, readable=readable)
        except AgentError:
            if not tries_left or not _mount_race(stderr, said):
                raise
    raise AssertionError("unreachable")


def _mount_race(stderr: Path, since: int) -> bool:
    """Whether what the sandbox wrote on stderr from ``since`` says a mount went away while it copied them."""
    try:  # a regular file only (a FIFO at the name would block the read)
        with open_regular(stderr, 1 << 62) as said:
            said.seek(since)
            return MOUNT_RACE in said.read(1 << 16)
    except (OSError, UnsafeFile):
        return False


def _run_agent(command: str, env: Mapping[str, str], *, timeout: float, stdout: Path, stderr: Path,
               cwd: Path | None = None, kill_when: Callable[[], bool] | None = None, sandbox: Sandbox | None = None,
               hidden: Sequence[Path] = (), readable: Sequence[Path] = ()) -> AgentRun:
    """Run the agent to completion, or until `timeout`, or until `kill_when()` turns true (SIGKILL).

    `cwd`: the agent's working folder (default: this process's; the engine passes the caller's folder), where
    a relative program or script in `command` is looked up. `sandbox` (default ``choose_sandbox()``): bubblewrap,
    in which the contract's files are the agent's only writable places, `readable` (beside its intents) it may
    read and `hidden` it never sees (``harness.sandbox.hidden_paths``)."""
    argv = argv_for(command)
    sandbox = sandbox or choose_sandbox()
    folder = Path(cwd or os.getcwd()).absolute()
    # the operator's checkpoint key is the harness's: an agent that could read it could forge the checkpoint
    full_env = {k: v for k, v in os.environ.items() if k not in OPERATOR_ENV} | dict(env)
    start, started_at = time.monotonic(), time.time()
    with open_append(stdout) as out, open_append(stderr) as err, _OrphanWatch() as watch, \
            contract_places(env, confined=sandbox.confined) as writable, pids_ceiling() as (ceiling, ceiling_said):
        words = [sys.executable, str(SUPERVISOR), str(watch.read_end), str(watch.status_write),
                 str(LATE_WINDOW_SECONDS)]
        fds = [watch.read_end, watch.status_write]
        if sandbox.confined:
            full_env = full_env | SCRATCH_ENV  # the home is read-only there: data and caches go to its temp folder
            files = AgentFiles(writable, (*_existing(env.get(INTENTS_ENV)), *readable), tuple(hidden), folder,
                               command_paths(argv, folder) + (Path(sys.executable).absolute(),))
            words = [*bwrap_argv(sandbox, files), *words, "--sandboxed"]
        proc = subprocess.Popen([*ceiling, *words, "--", *argv], env=full_env, stdout=out, stderr=err, cwd=folder,
                                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=tuple(fds))
        try:
            problem = watch.started()
        except BaseException:  # a signal while it starts (Ctrl-C): its session goes with it, nothing is left
            _kill_session(proc)
            raise
        if problem:
            code = proc.wait()
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            raise AgentError(f"cannot start agent {command!r}: {problem} ({argv[0]}; {how})")
        agent = _AgentProcesses(proc, watch.namespace if sandbox.confined else None, env.get(AUDIT_LOG_ENV))
        timed_out = killed = False
        said_at = start
        try:
            while True:
                try:
                    # in steps: the crash trigger is polled, and a long wait says it is waiting (harness.notices)
                    proc.wait(timeout=0.02 if kill_when else max(0.01, min(timeout - (time.monotonic() - start),
                                                                          STILL_RUNNING_EVERY)))
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - said_at >= STILL_RUNNING_EVERY:
                    said_at = time.monotonic()
                    notices.say(f"retry-harness: the agent is still running ({said_at - start:.0f} s of its "
                                f"{timeout:g} s limit; --agent-timeout sets it)\n")
                if kill_when is not None and kill_when():
                    agent.kill()
                    killed = True
                    break
                if time.monotonic() - start >= timeout:
                    timed_out = True
                    break
        finally:
            try:
                if proc.poll() is None or timed_out:
                    agent.terminate()
                else:
                    agent.kill()  # children the agent left behind
                agent.wait_gone()  # a planned crash restarts the agent only once nothing of it is left
                survivors = agent.survivors()
            finally:
                agent.release()
        exit_status, exited_at, left, still, forged = watch.ended()
        if forged is None and exit_status is not None and not (timed_out or killed) \
                and proc.returncode not in _exits_of(exit_status):
            forged = (f"its supervisor said the agent exited with status {exit_status}, but itself ended with "
                      f"{proc.returncode}")
        if forged is not None:  # the agent's word over the supervisor's: how it ended is not known
            exit_status = exited_at = left = None
            survivors.insert(0, f"one wrote to its supervisor's status pipe, which only the supervisor writes: "
                                f"{forged}")
        survivors[:0] = outlived(still)
    return AgentRun(command, None if (timed_out or killed) else (proc.returncode if exit_status is None
                                                                  else exit_status),
                    timed_out, killed, time.monotonic() - start, started_at, time.time(), log_size(env),
                    sandbox=f"{sandbox.description}; {ceiling_said}",
                    exited_at=None if (timed_out or killed) else exited_at,
                    left_running=left, survivors=survivors)


def _exits_of(status: int) -> tuple[int, ...]:
    """The supervisor's own exit status when the agent's was ``status``: the same (it dies of the agent's signal);
    bubblewrap reports a signal as 128 + its number."""
    return (status,) if status >= 0 else (status, 128 - status)


def _said(lines: list[str]) -> str:
    """The status pipe's lines, for a message: bounded, escaped."""
    text = "; ".join(lines)
    return repr(text if len(text) <= 200 else text[:197] + "...")


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """The agent's whole session (the supervisor, or bubblewrap and all it holds) killed, and waited for."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _existing(path: str | None) -> tuple[Path, ...]:
    return (Path(path),) if path and os.path.exists(path) else ()


@contextlib.contextmanager
def contract_places(env: Mapping[str, str], *, confined: bool = True) -> Iterator[tuple[Path, ...]]:
    """The contract's writable places of one run (log, trace, state dir), made first so that a sandbox or a
    container can lay them in (a file is bound, so it must exist); a file made here and still empty after the
    run is removed again, so the folder reads as if the binding had not been there. None when not ``confined``."""
    made, places = [], []
    for name in (AUDIT_LOG_ENV, TRACE_FILE_ENV, STATE_DIR_ENV):
        value = env.get(name)
        if not value or not confined:
            continue
        path = Path(value)
        if name != STATE_DIR_ENV and not path.exists() and path.parent.is_dir():
            path.touch()
            made.append(path)
        if path.exists():
            places.append(path)
    try:
        yield tuple(places)
    finally:
        for path in made:
            try:
                if path.stat().st_size == 0:
                    path.unlink()
            except OSError:
                pass


class _AgentProcesses:
    """Every process of one agent run: its sandbox's PID namespace (``namespace``, found through /proc), or the
    supervisor's process group; then whatever still carries the run's contract environment (``marker``:
    its audit log's path), found by /proc, which is how a process that left the group is seen unsandboxed."""

    def __init__(self, proc: subprocess.Popen[bytes], namespace: str | None, marker: str | None) -> None:
        self.proc, self.namespace = proc, namespace
        self.marker = f"{AUDIT_LOG_ENV}={marker}".encode() + b"\0" if marker else None
        # The namespace is held open while its processes are looked for: the kernel gives a freed namespace's
        # number to the next one made (another run's sandbox, a container's runc), whose processes a stale name
        # would match, and kill. None once its init is gone, and with it (the kernel's doing) all of it.
        self._held = _hold_namespace(proc.pid, namespace) if namespace else None

    def release(self) -> None:
        if self._held is not None:
            os.close(self._held)
            self._held = None

    def members(self) -> list[int]:
        if self._held is None:
            return []
        # a zombie (dead, not yet reaped as the namespace ends) holds nothing and does nothing: not counted
        return [pid for pid, stat in _processes()
                if stat[stat.rindex(")") + 2] not in "ZX" and _link(pid, "ns/pid") == self.namespace]

    def alive(self) -> bool:
        return group_alive(self.proc.pid) or bool(self.members())

    def signal(self, sig: int) -> None:
        _kill_group(self.proc, sig)  # the supervisor's group, or bubblewrap's outer process
        for pid in self.members():
            _kill_pid(pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def terminate(self) -> None:
        if self.namespace is None:
            self.signal(signal.SIGTERM)
        else:  # the agent's processes, not bubblewrap's outer one: its death would SIGKILL them without a grace
            for pid in self.members():
                _kill_pid(pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.proc.wait()

    def wait_gone(self, timeout: float = GROUP_GONE_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                raise AgentError(f"the agent's processes (group {self.proc.pid}) survived SIGKILL for {timeout:g} s")
            self.kill()
            time.sleep(0.01)
        self.proc.poll()

    def survivors(self) -> list[str]:
        """The processes that still carry this run's contract environment once its group or sandbox is gone
        (a double fork and ``setsid``): each said, then killed. Empty in a sandbox, whose kill takes them all."""
        if self.marker is None:
            return []
        found = []
        for pid, stat in _processes():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            if self.marker in environ and stat[stat.rindex(")") + 2] not in "ZX":
                name = stat[stat.index("(") + 1:stat.rindex(")")]
                found.append(f"pid {pid} ({name}), outside the agent's process group")
                _kill_pid(pid, signal.SIGKILL)
        return found


def _processes() -> Iterator[tuple[int, str]]:
    """``(pid, its /proc stat line)`` of every process this one can see (none where there is no /proc)."""
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "stat").read_text()
            except OSError:
                continue


def _hold_namespace(launcher: int, namespace: str) -> int | None:
    """An fd on the PID namespace named ``namespace`` of the sandbox that bubblewrap (``launcher``, this process's
    child, not yet reaped) started: its first process is bubblewrap's child. None when that process is gone."""
    for pid, stat in _processes():
        if stat[stat.rindex(")") + 2:].split()[1] != str(launcher):
            continue
        try:
            fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY)
        except OSError:
            continue
        if f"pid:[{os.fstat(fd).st_ino}]" == namespace:
            return fd
        os.close(fd)
    return None


def _link(pid: int, name: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/{name}")
    except OSError:
        return None


def _kill_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _OrphanWatch:
    """The pipes of ``agent_supervisor``: the watch pipe (only this process holds its write end, so the
    supervisor reads end of file when the harness dies, however it dies) and its status pipe (started, in a
    sandbox with its PID namespace, then how the agent's own process ended)."""

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()  # non-inheritable: no other child holds the write end
        self._status_read, self.status_write = os.pipe()
        self._status = b""
        self.namespace: str | None = None  # the sandbox's PID namespace as /proc names it (``pid:[N]``)

    def started(self) -> str:
        """Wait for the supervisor to start the agent: "" when it runs, else why it could not start."""
        os.close(self.status_write)
        self.status_write = -1
        while b"\n" not in self._status and (chunk := os.read(self._status_read, 4096)):
            self._status += chunk
        line, _, self._status = self._status.partition(b"\n")
        text = line.decode(errors="replace").strip()
        word, _, namespace = text.partition(" ")
        if word == "started":  # said before the agent runs: not its word
            self.namespace = namespace if namespace.startswith("pid:[") else None
            return ""
        if not text:  # bubblewrap itself failed before the supervisor ran: its stderr says why (agent.stderr)
            return "the sandbox could not start it (agent.stderr says why; HARNESS_SANDBOX=off runs it unsandboxed)"
        return text.removeprefix("cannot start: ")

    def ended(self) -> tuple[int | None, float | None, int | None, int, str | None]:
        """How the agent's own process ended, as the supervisor said: (status, wall clock, processes it left
        running, of which still running when the late window closed, None); Nones when it never said (killed
        first). The supervisor writes ``exited`` and ``outlived`` once each, in that order: anything else on the
        pipe was written by another process (a forged ``exited 0``, a later exit time), and the last item says so
        (then nothing of it is believed)."""
        os.set_blocking(self._status_read, False)
        try:
            while chunk := os.read(self._status_read, 4096):
                self._status += chunk
        except BlockingIOError:
            pass
        lines = self._status.decode(errors="replace").splitlines()
        words = [line.split(" ", 1)[0] for line in lines]
        foreign = f"its status pipe holds lines the supervisor never wrote ({_said(lines)})"
        if words not in ([], ["exited"], ["exited", "outlived"]):
            return None, None, None, 0, foreign
        said = {line.split(" ", 1)[0]: line.split()[1:] for line in lines}
        try:
            exited, outlived = said.get("exited", []), said.get("outlived", ["0"])
            if len(exited) == 3:
                return int(exited[0]), float(exited[1]), int(exited[2]), int(outlived[0]), None
        except (ValueError, IndexError):
            pass
        return None, None, None, 0, foreign if lines else None

    def __enter__(self) -> _OrphanWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.read_end, self._write_end, self._status_read, self.status_write):
            if fd >= 0:
                os.close(fd)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. A zombie (dead, waiting for whoever inherited it to
    reap it; some container inits take a second) does not count: it holds nothing and does nothing."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, group = stat[stat.rindex(")") + 2:].split()[:3]  # after "pid (comm) "
        if int(group) == pgid and state not in ("Z", "X"):
            return True
    return False


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    proc.poll()
