"""A team's own service as a destination: its image, run per scenario behind the fault proxy, its ground truth
read by the ledger probe it declares (docs/containers.md, "A team's own service as a destination").

    destinations:
      orders:
        api: orders                 # the contract the agent is told, as for a fake
        image: sample-orders:dev    # present: a container destination
        port: 8080
        ledger: {http: {path: /_effects, rows: items}, fields: {effect_ref: id, committed_at: committed_at}}

``acquire_destinations`` is what the engine asks for a scenario's destinations: the warm pool's fake host as
before when none is a container (nothing of docker is imported then); else ``ServiceDestinations``, the fake
host of the others (if any) and, per container destination, a ``RunningService``: on a network of the run's
own (a ``database:`` beside it under its alias, never published), its port published on 127.0.0.1 at a host
port picked at random and kept across ``restart()`` (the proxy routes to it for the whole run), ready once a
GET of its health path answers 2xx. A ``LedgerSync`` per service writes what the probe lists into the run's
live ledger (the fake host's when there is one, else a file of its own), in the harness's schema; after the
agent ended ``final_probe`` makes the last listing and infers flow ids from the journal. ``release_destinations``
saves each container's log into the evidence folder and removes the containers and the network, whatever
happened (the engine calls it in a ``finally``; the reaper of ``harness.containers.docker_client`` covers a harness
killed outright). Nothing here is pooled: a real service keeps state.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fake_destinations.ledger import DESTINATIONS_WRITER, PROBE_WRITER, EffectWriter
from harness.containers.probe import Exec, LedgerSync, ProbeError, list_http, list_sql
from harness.contract import LEDGER_DB_FILE
from harness.errors import ContainerError

if TYPE_CHECKING:
    from docker.models.containers import Container
    from docker.models.networks import Network

    from fake_destinations.spec import DestinationSpec

SERVICE_LOG_FILE = "service.{name}.log"  # a container destination's stdout and stderr, in the evidence folder
DATABASE_LOG_FILE = "service.{name}.database.log"
LOG_TAIL_LINES = 20
PUBLISH_ATTEMPTS = 5  # a host port picked at random may be taken before the engine binds it: pick another
HEALTH_POLL_SECONDS = 0.1


class ServiceStartError(ContainerError):
    """A container destination did not become ready: the image, the URL, the last error, the log tail."""


def container_specs(specs: Mapping[str, DestinationSpec]) -> dict[str, DestinationSpec]:
    return {name: spec for name, spec in specs.items() if spec.is_container}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(container: Container | None, lines: int = LOG_TAIL_LINES) -> str:
    """The container's last ``lines`` lines of output, indented, or why there are none."""
    if container is None:
        return "  (no container)"
    try:
        text = container.logs(tail=lines).decode("utf-8", "replace").rstrip()
    except Exception as exc:  # noqa: BLE001 - a log we cannot read must not hide the error it explains
        return f"  (its log cannot be read: {exc})"
    return "\n".join(f"  {line}" for line in text.splitlines()) if text else "  (its log is empty)"


def _status(container: Container) -> tuple[str, int | None]:
    container.reload()
    state = container.attrs.get("State") or {}
    return str(state.get("Status") or container.status), state.get("ExitCode")


@dataclass
class RunningService:
    """One container destination of a run: its container (and its database's), where it answers, its probe."""

    name: str
    spec: DestinationSpec
    run: str
    network: Network
    host_port: int = 0
    container: Container | None = None
    database: Container | None = None
    sync: LedgerSync | None = None
    startup_seconds: float = 0.0
    restarts: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.host_port}"

    # -- start, readiness, restart -----------------------------------------------------------

    def start(self) -> None:
        from harness.containers.docker_client import ensure_image, start

        began = time.perf_counter()
        spec = self.spec
        assert spec.image is not None and spec.port is not None  # a container destination (validated)
        ensure_image(spec.image)
        if spec.database is not None:
            ensure_image(spec.database.image)
            self.database = start(spec.database.image, role="database", run=self.run,
                                  name=f"{self.network.name}-{self.name}-db"[:120],
                                  environment=dict(spec.database.env), command=spec.database.command,
                                  network=self.network.name,
                                  networking_config={self.network.name: self._endpoint(spec.database.alias)})
        self.container = self._start_service(spec.image, spec.port, start)
        self.wait_ready()
        self.startup_seconds = time.perf_counter() - began

    def _endpoint(self, alias: str) -> Any:
        from harness.containers.docker_client import client

        return client().api.create_endpoint_config(aliases=[alias])

    def _start_service(self, image: str, port: int, start: Any) -> Container:
        """The service's container, its port published at a free host port (another one if that was taken)."""
        problem: ContainerError | None = None
        for _ in range(PUBLISH_ATTEMPTS):
            self.host_port = _free_port()
            try:
                return start(image, role="service", run=self.run, name=f"{self.network.name}-{self.name}"[:120],
                             environment=dict(self.spec.env or {}), command=self.spec.command,
                             network=self.network.name, ports={f"{port}/tcp": ("127.0.0.1", self.host_port)})
            except ContainerError as exc:
                if "already allocated" not in str(exc) and "address already in use" not in str(exc):
                    raise
                problem = exc
                self._remove_named(f"{self.network.name}-{self.name}"[:120])  # created, not started
        assert problem is not None
        raise problem

    @staticmethod
    def _remove_named(name: str) -> None:
        import docker.errors

        from harness.containers.docker_client import client, remove

        try:
            remove(client().containers.get(name))
        except docker.errors.NotFound:
            pass

    def wait_ready(self) -> None:
        """Until a GET of the health path answers 2xx; ``ServiceStartError`` when the container exits first or
        the timeout passes, with the image, the URL, the last error and the container's log tail."""
        assert self.container is not None
        health = self.spec.health
        path, timeout = (health.path, health.timeout_seconds) if health is not None else ("/", 30.0)
        url = self.url + path
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2.0) as response:
                    if 200 <= response.status < 300:
                        return
                    last = f"answered {response.status}"
            except urllib.error.HTTPError as exc:
                last = f"answered {exc.code}"
            except (OSError, urllib.error.URLError) as exc:
                last = str(getattr(exc, "reason", None) or exc)
            status, code = _status(self.container)
            if status in ("exited", "dead"):
                raise ServiceStartError(
                    f"destination {self.name}: the container of image {self.spec.image} exited with status {code} "
                    f"before GET {url} answered 2xx (last: {last}); its log (tail):\n{log_tail(self.container)}")
            if time.monotonic() >= deadline:
                raise ServiceStartError(
                    f"destination {self.name}: image {self.spec.image} did not answer 2xx on GET {url} within "
                    f"{timeout:g} s (health.timeout_seconds); last: {last}; the container is {status}; its log "
                    f"(tail):\n{log_tail(self.container)}")
            time.sleep(HEALTH_POLL_SECONDS)

    def restart(self) -> None:
        """A crash and a start of the service's container (its database's state kept, its own disk too), on the
        same host port, then ready again."""
        assert self.container is not None
        began = time.perf_counter()
        import docker.errors

        try:
            self.container.kill()
        except docker.errors.APIError:  # already stopped
            pass
        self.container.wait(timeout=30)
        try:
            self.container.start()
        except docker.errors.APIError as exc:
            raise ContainerError(f"destination {self.name}: cannot start image {self.spec.image} again after the "
                                 f"planned crash: {exc}") from None
        self.wait_ready()
        self.restarts.append(time.perf_counter() - began)

    # -- the ledger probe --------------------------------------------------------------------

    def exec_in(self, which: str) -> Exec:
        def run(words: Sequence[str]) -> tuple[int, bytes, bytes]:
            container = self.database if which == "database" else self.container
            if container is None:
                raise ProbeError(f"destination {self.name}: no {which} container to run the query in")
            result = container.exec_run(list(words), demux=True)
            out, err = result.output if isinstance(result.output, tuple) else (result.output, b"")
            return int(result.exit_code if result.exit_code is not None else -1), out or b"", err or b""
        return run

    def lister(self) -> Any:
        ledger = self.spec.ledger
        assert ledger is not None  # validated
        if ledger.http is not None:
            http = ledger.http
            where = f"destination {self.name}: ledger probe"
            return lambda: list_http(self.url + http.path, http.rows, where=where)
        sql = ledger.sql
        assert sql is not None
        run = self.exec_in(sql.container)
        where = f"destination {self.name}: ledger probe ({sql.engine} query in the {sql.container} container)"
        return lambda: list_sql(sql.model_dump(), run, where)

    def attach_probe(self, ledger_path: Path, key: bytes | None = None) -> LedgerSync:
        ledger = self.spec.ledger
        assert ledger is not None
        kinds = self.spec.effect_kinds()
        from fake_destinations.spec import describe

        found = describe(self.spec).lookup
        self.sync = LedgerSync(self.name, ledger_path, self.lister(), ledger.fields.model_dump(),
                               default_kind=kinds[0] if len(kinds) == 1 else None, interval=ledger.interval_seconds,
                               lookup=(found.path, found.query_param) if found is not None else None, key=key)
        return self.sync

    # -- the end -----------------------------------------------------------------------------

    def not_running(self) -> str:
        """When the service's container has stopped: its status and log tail, as a sentence's end ("" if it runs)."""
        if self.container is None:
            return ""
        try:
            status, code = _status(self.container)
        except Exception:  # noqa: BLE001 - the question is asked to explain another error
            return ""
        if status == "running":
            return ""
        tail = " | ".join(line.strip() for line in log_tail(self.container, 5).splitlines())
        return f" (its container is {status}, exit status {code}; its log ends: {tail})"

    def save_logs(self, folder: Path | None) -> None:
        if folder is None or not folder.is_dir():
            return
        for container, name in ((self.container, SERVICE_LOG_FILE), (self.database, DATABASE_LOG_FILE)):
            if container is None:
                continue
            try:
                data = container.logs()
            except Exception as exc:  # noqa: BLE001 - the container may be gone already; say so in the file
                data = f"(the container's log cannot be read: {exc})\n".encode()
            (folder / name.format(name=self.name)).write_bytes(data)

    def remove(self) -> None:
        from harness.containers.docker_client import remove

        if self.sync is not None:
            self.sync.stop()
        for container in (self.container, self.database):
            if container is not None:
                remove(container)

    def describe(self) -> dict[str, Any]:
        return {"image": self.spec.image, "container": getattr(self.container, "name", None),
                "database": getattr(self.database, "name", None), "url": self.url,
                "startup_seconds": round(self.startup_seconds, 3),
                "restart_seconds": [round(s, 3) for s in self.restarts],
                "probe": self.sync.report() if self.sync is not None else None}


class ServiceDestinations:
    """A scenario's destinations when some are containers: the fake host of the others (or none) and the
    services; the engine uses it as it uses a ``DestinationHost`` (``urls``, ``ledger_path``, ``restart``,
    ``state``, ``stop``)."""

    def __init__(self, fakes: Any, run: str) -> None:
        self.fakes = fakes
        self.run = run
        self.services: dict[str, RunningService] = {}
        self.network: Network | None = None
        self._own_dir: Path | None = None
        if fakes is not None:
            self.ledger_path = Path(fakes.ledger_path)
            self.ledger_key = fakes.ledger_key
        else:
            self._own_dir = Path(tempfile.mkdtemp(prefix="service-ledger-"))
            self.ledger_path = self._own_dir / LEDGER_DB_FILE
            self.ledger_key = secrets.token_bytes(32)
            EffectWriter(self.ledger_path).close()  # the tables, before any effect: a run may commit none
        self.released = False

    def start(self, specs: Mapping[str, DestinationSpec]) -> None:
        import docker.errors

        from harness.containers.docker_client import client, labels

        try:
            self.network = client().networks.create(f"rh-{self.run}"[:200], driver="bridge",
                                                    labels=labels("service", self.run), check_duplicate=True)
        except docker.errors.APIError as exc:
            raise ContainerError(f"cannot make the run's network for destination(s) {', '.join(specs)}: "
                                 f"{exc}") from None
        for name, spec in specs.items():
            service = RunningService(name, spec, self.run, self.network)
            self.services[name] = service
            service.start()
        for service in self.services.values():  # effects listed from the start: none before the agent, normally
            sync = service.attach_probe(self.ledger_path, self.ledger_key)
            try:
                sync.sync()
            except ProbeError as exc:
                why = str(exc).removeprefix(f"destination {service.name}: ledger probe: ")
                raise ContainerError(f"destination {service.name}: the ledger probe does not work on the ready "
                                     f"service: {why}") from None
            sync.start()

    @property
    def urls(self) -> dict[str, str]:
        return {**(self.fakes.urls if self.fakes is not None else {}),
                **{name: service.url for name, service in self.services.items()}}

    def restart(self) -> None:
        if self.fakes is not None:
            self.fakes.restart()
        for service in self.services.values():
            service.restart()

    def state(self) -> dict[str, Any]:
        """The fake destinations' writes in progress (a container's are its own business: none said)."""
        return self.fakes.state() if self.fakes is not None else {"in_flight": {}}

    def stop(self) -> None:
        if self.fakes is not None:
            self.fakes.stop()

    @property
    def seal_problems(self) -> list[str]:
        """What the fake destinations' ledger lost while none of their processes held it (a restart)."""
        return list(self.fakes.seal_problems) if self.fakes is not None else []

    def gate(self, token: str | None) -> None:
        """The fake destinations' gate (a team's service takes what it is sent: the header is one more)."""
        if self.fakes is not None:
            self.fakes.gate(token)

    def agent_containers(self, ids: list[str]) -> None:
        """The fake destinations' word of the agent's containers (a team's service records no sender)."""
        if self.fakes is not None:
            self.fakes.agent_containers(ids)

    def seal(self) -> dict[str, dict[str, int]]:
        """Each writer's rows of the ledger by its own account (``verify_ledger``): the fake destinations' and
        the probes' (the effects they listed, the reads they added)."""
        written = {DESTINATIONS_WRITER: self.fakes.seal()} if self.fakes is not None else {}
        syncs = [service.sync for service in self.services.values() if service.sync is not None]
        written[PROBE_WRITER] = {"effects": sum(len(sync.synced) for sync in syncs),
                                 "requests": sum(sync.reads for sync in syncs)}
        return written

    def final_probe(self, journal: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, Any]]:
        """The last listing of every service: why a probe failed, per destination, and what each did."""
        failures = {}
        for name, service in self.services.items():
            if service.sync is None:
                failures[name] = "the ledger probe never ran (the service did not start)"
                continue
            problem = service.sync.final(journal)
            if problem is not None:
                failures[name] = problem + service.not_running()
        return failures, {name: service.describe() for name, service in self.services.items()}

    def release(self, evidence_folder: Path | None) -> list[str]:
        """Save the containers' logs into ``evidence_folder``, remove them and the network (each step tried,
        whatever the others did), and the ledger file of our own once it is copied. Returns what could not be
        removed (the reaper removes it when this process ends); a second call does nothing."""
        if self.released:
            return []
        self.released = True
        problems = []
        for service in self.services.values():
            service.save_logs(evidence_folder)
            try:
                service.remove()
            except Exception as exc:  # noqa: BLE001 - remove the others, then say what could not go
                problems.append(f"destination {service.name}: {exc}")
        if self.network is not None:
            import docker.errors

            try:
                self.network.remove()
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                problems.append(f"network {self.network.name}: {exc}")
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        return problems


def acquire_destinations(pool: Any, specs: Mapping[str, DestinationSpec], *, evidence_folder: Path) -> Any:
    """The running destinations of a scenario: the pool's fake host when none is a container, else a
    ``ServiceDestinations`` (started, ready, probed once; released again when it cannot be)."""
    containers = container_specs(specs)
    if not containers:
        return pool.acquire(specs, evidence_folder=evidence_folder)
    fakes = {name: spec for name, spec in specs.items() if name not in containers}
    host = pool.acquire(fakes, evidence_folder=evidence_folder) if fakes else None
    destinations = ServiceDestinations(host, Path(evidence_folder).name)
    try:
        destinations.start(containers)
    except BaseException:
        destinations.release(evidence_folder)  # the start's error is the one to tell
        raise
    return destinations


def final_probe(host: Any, journal: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, Any]]:
    """``ServiceDestinations.final_probe``; nothing for a plain fake host."""
    if isinstance(host, ServiceDestinations):
        return host.final_probe(journal)
    return {}, {}


def seal_destinations(host: Any) -> dict[str, dict[str, int]]:
    """Each writer's rows of the run's ledger by its own account (``ServiceDestinations.seal``,
    ``DestinationHost.seal``), to hold the saved ledger to."""
    if isinstance(host, ServiceDestinations):
        return host.seal()
    return {DESTINATIONS_WRITER: host.seal()}


def release_destinations(host: Any, evidence_folder: Path | None) -> list[str]:
    """``ServiceDestinations.release``: what could not be removed; a plain fake host stays in its pool."""
    if isinstance(host, ServiceDestinations):
        return host.release(evidence_folder)
    return []
