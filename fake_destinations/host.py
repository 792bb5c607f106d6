"""``DestinationHost``: runs the scenario's fake destinations in one child process and controls it.

    with DestinationHost({"tickets": {"service": "tickets"}}, ledger_path) as host:
        host.urls["tickets"]       # "http://127.0.0.1:PORT"
        host.reset()               # clear keys, resources and the ledger (over the process's stdin)
        host.advance_clock(86400)  # jump the destination clock (retention, lag, async completion)
        host.restart()             # kill and start again on the same ports; the ledger is kept
        host.seal()                # the rows the process wrote, to hold the saved ledger to (verify_ledger)

The control plane is the child's stdin and stdout, which only this object holds: no port answers for it,
so an agent under test (which can reach every loopback port) cannot reset, advance the clock or read
the state of this run's destinations, nor of any other run's. The key that signs the ledger's rows
(``ledger_key``) goes down the same pipe and lives in this object and the child only.

Errors:
    DestinationError            - base class
    └── DestinationStartError   - the child exited or did not report ready in time (with its stderr tail)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fake_destinations.ledger import read_effects, read_requests
from fake_destinations.runtime import LIVE_LOCK, READY_PREFIX
from fake_destinations.spec import DestinationSpec, load_destination
from harness.contract import LEDGER_DB_FILE


def _child_env() -> dict[str, str]:
    # The child must import this very package even when the project is not installed.
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    # aiohttp builds TLS client contexts at import, reading the system CA bundle (~50 ms); the
    # destinations never open an outbound TLS connection, so an empty bundle is safe and faster.
    return {**os.environ, "PYTHONUNBUFFERED": "1", "SSL_CERT_FILE": os.devnull, "SSL_CERT_DIR": os.devnull,
            "PYTHONPATH": root + (os.pathsep + path if path else "")}


class DestinationError(RuntimeError):
    """Raised when the destination process cannot be controlled (a control command failed, not started)."""


class DestinationStartError(DestinationError):
    """Raised when the destination process exits or stays silent during start-up; carries its stderr."""


class DestinationHost:
    def __init__(self, specs: Mapping[str, DestinationSpec | dict[str, Any]], ledger_path: Path, *,
                 log_path: Path | None = None, owned_dir: Path | None = None) -> None:
        self.specs = {name: spec if isinstance(spec, DestinationSpec) else load_destination(spec)
                      for name, spec in specs.items()}
        self.ledger_path = Path(ledger_path)
        if log_path is None:  # beside the ledger: the caller's folder, nothing of ours to clean up
            log_path = self.ledger_path.with_name(self.ledger_path.name + ".destinations.log")
        self.log_path = Path(log_path)
        self.state_dir = self.ledger_path.parent
        # a folder the process removes itself if the harness dies without stopping it (a pool's temp folder)
        self.owned_dir = owned_dir
        # the evidence folder of the run being served: the process saves its ledger there itself if the
        # harness dies before its teardown did (so a kill -9 leaves the ground truth with the evidence)
        self.evidence_folder: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, int] = {}
        self.startup_seconds: float | None = None
        self._control_lock = threading.Lock()  # one command on the pipe at a time
        self._pending = b""  # what the child wrote past the last line read
        self.ledger_key = secrets.token_bytes(32)  # never written down: the agent can read files, not this
        self.rows: dict[str, int] = {}  # the signed rows the process says it holds (at start, then by seal)
        self.seal_problems: list[str] = []  # what the ledger lost while no process held it (a restart)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> DestinationHost:
        if self.process is not None:
            raise DestinationError("destinations already started")
        config = {"ledger": str(self.ledger_path), "state_dir": str(self.state_dir),
                  "destinations": {n: s.model_dump(mode="json") for n, s in self.specs.items()},
                  "ports": self.ports,
                  "owned_dir": str(self.owned_dir) if self.owned_dir else None,
                  "evidence_folder": str(self.evidence_folder) if self.evidence_folder else None}
        self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
        config_path = self.ledger_path.with_name(self.ledger_path.name + ".destinations.json")
        config_path.write_text(json.dumps(config))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "fake_destinations", "--config", str(config_path)],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.PIPE, start_new_session=True,
                env=_child_env())
        self._pending = b""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"ledger_key": self.ledger_key.hex()}).encode() + b"\n")
            self.process.stdin.flush()
            ready = self._wait_ready(timeout)
        except BaseException:
            self._kill()
            raise
        self.startup_seconds = time.perf_counter() - began
        self.ports = dict(ready["destinations"])
        self.rows = dict(ready.get("rows") or {})
        return self

    def _read_line(self, timeout: float, what: str = "ready") -> bytes:
        """The child's next line on stdout, within ``timeout``; DestinationStartError if it exits or stays silent."""
        assert self.process and self.process.stdout
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DestinationStartError(
                        f"fake destinations did not answer {what} within {timeout:g}s\n{self._stderr_tail()}")
                if selector.select(remaining):
                    chunk = os.read(self.process.stdout.fileno(), 65536)
                    if not chunk:
                        code = self.process.wait(timeout=5)
                        raise DestinationStartError(
                            f"fake destinations exited with status {code} "
                            f"{'during start-up' if what == 'ready' else 'before ' + what}\n{self._stderr_tail()}")
                    self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    def _wait_ready(self, timeout: float) -> dict[str, Any]:
        line = self._read_line(timeout, "ready").decode()
        if not line.startswith(READY_PREFIX):
            raise DestinationStartError(f"unexpected start-up line {line!r}\n{self._stderr_tail()}")
        return json.loads(line[len(READY_PREFIX):])

    def _stderr_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no destination log)"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"destination log {self.log_path} (tail):\n{tail}" if tail else "(destination log empty)"

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the process group; kill it if it does not exit within ``timeout``."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            self._kill()
        finally:
            self._close()

    def _kill(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=5)
        finally:
            self._close()

    def _close(self) -> None:
        if self.process is not None:
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):  # a broken pipe to a dead child: nothing to flush
                        pipe.close()
        self.process = None

    def restart(self, timeout: float = 10.0) -> None:
        """Kill the destinations (a crash, not a clean stop) and start them on the same ports. The rows the
        process held just before are held to what the next one finds: while none runs, nobody else may take any."""
        try:
            before = self.seal()
        except DestinationError:
            before = dict(self.rows)  # the process is already dead: what it last said
        self._kill()
        self.start(timeout)
        for table, count in before.items():
            if self.rows.get(table, 0) < count:
                self.seal_problems.append(
                    f"{table}: the destinations held {count} row(s) of their own before their restart and "
                    f"{self.rows.get(table, 0)} after it: removed while they were down")

    def __enter__(self) -> DestinationHost:
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection and control --------------------------------------------------------------

    @property
    def urls(self) -> dict[str, str]:
        return {name: f"{'ssh' if self.specs[name].service == 'ssh' else 'http'}://127.0.0.1:{port}"
                for name, port in self.ports.items()}

    def _command(self, name: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
        """One command of the control plane, over the child's stdin and stdout (see the module docstring)."""
        with self._control_lock:
            if self.process is None or self.process.stdin is None:
                raise DestinationError("destinations are not running")
            try:
                self.process.stdin.write(json.dumps({"command": name, "body": body or {}}).encode() + b"\n")
                self.process.stdin.flush()
                reply = json.loads(self._read_line(timeout, f"the {name} command"))
            except (OSError, ValueError, DestinationStartError) as exc:
                raise DestinationError(f"control command {name} failed: {exc}\n{self._stderr_tail()}") from exc
        if "error" in reply:
            raise DestinationError(f"control command {name} refused: {reply['error']}")
        return dict(reply["result"])

    def reset(self, evidence_folder: Path | None = None,
              specs: Mapping[str, DestinationSpec] | None = None) -> None:
        """Forget keys, resources, counters, the clock offset and the ledger rows, without restarting.
        ``evidence_folder``: the run now served; if the harness dies before saving that run's ledger
        there, the process saves it there before it stops. ``specs``: the same destinations (names,
        services) declared otherwise, taken without a restart (and by a restart later)."""
        body: dict[str, Any] = {}
        if evidence_folder is not None:
            self.evidence_folder = Path(evidence_folder)
            body["evidence_folder"] = str(self.evidence_folder)
        if specs is not None:
            body["destinations"] = {n: s.model_dump(mode="json") for n, s in specs.items()}
        self._command("reset", body)
        self.rows, self.seal_problems = {}, []
        if specs is not None:
            self.specs = dict(specs)

    def advance_clock(self, seconds: float) -> float:
        """Move the destination clock forward (key retention, lookup lag, async completion)."""
        return float(self._command("clock", {"advance": seconds})["now"])

    def state(self) -> dict[str, Any]:
        """The destination clock and the keys of writes still in progress, per destination."""
        return self._command("state")

    def gate(self, token: str | None) -> None:
        """Serve only requests carrying ``token`` in ``contract.GATE_HEADER`` (the fault proxy's), until the
        next reset; ``None``: serve any (a test driving the destinations directly)."""
        self._command("gate", {"token": token})

    def agent_containers(self, ids: list[str]) -> None:
        """The containers the run's agent runs in (full ids), until the next reset: what their processes send past
        the proxy is the agent's (``fake_destinations.peer``)."""
        self._command("agent_containers", {"ids": ids})

    def seal(self) -> dict[str, int]:
        """How many rows of each signed table the process wrote into this run's ledger (``verify_ledger``)."""
        self.rows = {str(k): int(v) for k, v in self._command("seal")["rows"].items()}
        return dict(self.rows)

    def effects(self) -> list[dict[str, Any]]:
        return read_effects(self.ledger_path)

    def requests(self) -> list[dict[str, Any]]:
        return read_requests(self.ledger_path)


POOL_PREFIX = "destination-pool-"


def _in_use(folder: Path) -> bool:
    """Whether a live destination process holds a lock anywhere in ``folder``."""
    import fcntl

    for lock in folder.rglob(LIVE_LOCK):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


def remove_dead_pools(tmp: Path) -> None:
    """Remove pool folders whose harness (the pid in the name) is dead and whose destination processes are all
    gone (``LIVE_LOCK``). Its destination processes remove their own folders when they notice they are orphaned;
    this covers a harness killed between creating a folder and starting the process that would have cleaned it."""
    for folder in tmp.glob(f"{POOL_PREFIX}*-*"):
        pid = folder.name[len(POOL_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            if not _in_use(folder):  # an orphan still serving, or saving its run's ledger: its own to remove
                shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # another user's live harness
            pass


class DestinationPool:
    """Warm destination processes reused across scenarios of one process.

    Starting a destination process is most of a scenario's harness overhead. A scenario whose
    destinations have the same names and services as a recent one's gets that process back, reset
    and given the scenario's declarations (retention, lag, delays, failures...) (keys,
    resources, counters, clock and ledger cleared); others start a new one. The least recently
    used process beyond ``max_hosts`` is stopped. ``close()`` stops them all.
    """

    def __init__(self, root: Path | None = None, *, max_hosts: int = 4) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if root is None:
            remove_dead_pools(Path(tempfile.gettempdir()))
            self._tmp = tempfile.TemporaryDirectory(prefix=f"{POOL_PREFIX}{os.getpid()}-")
            root = Path(self._tmp.name)
        self.root = Path(root)
        self.max_hosts = max_hosts
        self._hosts: dict[str, DestinationHost] = {}
        self._started = 0
        self.reused = 0

    def acquire(self, specs: Mapping[str, DestinationSpec | dict[str, Any]], *,
                evidence_folder: Path | None = None) -> DestinationHost:
        """A running host for ``specs``, fresh or reset; ``evidence_folder``: the run it now serves
        (``DestinationHost.reset``)."""
        validated = {name: spec if isinstance(spec, DestinationSpec) else load_destination(spec)
                     for name, spec in specs.items()}
        # a process serves any scenario with the same destination names and services: the options (retention,
        # lag, delays, failures...) are taken on reset, so exploring them starts no process per schedule
        key = json.dumps({n: s.service for n, s in validated.items()}, sort_keys=True)
        host = self._hosts.pop(key, None)
        if host is not None:
            try:
                if host.process is None or host.process.poll() is not None:
                    raise DestinationError("the pooled destination process has exited")
                host.reset(evidence_folder, validated)
                self.reused += 1
            except DestinationError:
                host.stop()
                host = None
        if host is None:
            self._started += 1
            self.root.mkdir(parents=True, exist_ok=True)
            # a folder of its own: a ledger left there earlier would survive into this host
            folder = Path(tempfile.mkdtemp(prefix=f"host-{self._started}-", dir=self.root))
            host = DestinationHost(validated, folder / LEDGER_DB_FILE, log_path=folder / "destinations.log",
                                   owned_dir=folder if self._tmp is not None else None)
            host.evidence_folder = evidence_folder
            host.start()
        self._hosts[key] = host  # most recently used last
        while len(self._hosts) > self.max_hosts:
            oldest = next(iter(self._hosts))
            self._hosts.pop(oldest).stop()
        return host

    def close(self) -> None:
        while self._hosts:
            self._hosts.popitem()[1].stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
