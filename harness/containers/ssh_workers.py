"""Machines for remote pytest-xdist workers, reached over SSH: containers running sshd, each with the harness
installed at a path of its own, for ``pytest --scenario all --tx ssh=...`` (docs/using.md, "Spreading a
catalogue over machines").

``SSHWorkers(["/opt/ci/a/venv", "/srv/b/env"])`` is a context manager: it makes a key pair in a private temp
folder, starts one container per install path from ``retry-harness/ssh-worker:<hash>`` (sshd on a port the engine
publishes on 127.0.0.1 only), installs the harness there (a venv with the image's distributions, the harness
packages and their dist-info copied in: its ``pytest11`` entry point loads the plugin), copies a project folder
(a team's scenarios, its ini file) into each worker's working folder, and writes an ``ssh_config`` with each
container's own host key pinned. ``tx_specs()`` are the ``--tx`` values execnet takes. On exit the containers
and the key folder are removed; a harness killed before that leaves its containers to the reaper (their labels
name this process, ``harness.containers.docker_client``), and the key folder with them (``FOLDER_LABEL``).
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import TYPE_CHECKING

from harness.containers import docker_client
from harness.containers.images import PYTHON, ensure_ssh_worker_image, harness_files
from harness.errors import ContainerError

if TYPE_CHECKING:
    from docker.models.containers import Container

ROLE = "worker"
USER = "root"  # Debian's sshd lets root in with a key (PermitRootLogin prohibit-password), never a password
READY_TIMEOUT = 60.0
SSH_TIMEOUT = 60.0


@dataclass(frozen=True)
class SSHWorker:
    """One worker machine: its ssh Host alias, its published port, where the harness is and where it works."""

    name: str
    port: int
    install: str  # the venv the harness is installed in
    workdir: str  # the worker's working folder (its pytest rootdir): the project's copy
    container: Container

    @property
    def python(self) -> str:
        return f"{self.install}/bin/python"

    def tx(self, ssh_config: Path) -> str:
        """The ``--tx`` value: execnet's ssh gateway through our config, the worker's python and folder."""
        return f"ssh={self.name}//ssh_config={ssh_config}//python={self.python}//chdir={self.workdir}"


class SSHWorkers:
    """Containers running sshd, one per install path; see the module's docstring."""

    def __init__(self, installs: Sequence[str], *, project: Path | None = None, run: str | None = None) -> None:
        for path in installs:
            if not PurePosixPath(path).is_absolute():
                raise ValueError(f"a worker's install path must be absolute, got {path!r}")
        if len(set(installs)) != len(installs):
            raise ValueError(f"each worker needs an install path of its own, got {list(installs)}")
        self.installs = list(installs)
        self.project = project
        self.run = run or f"ssh-{docker_client.OWNER}"
        self.workers: list[SSHWorker] = []
        self.folder: Path | None = None  # the key pair, known_hosts and ssh_config

    @property
    def ssh_config(self) -> Path:
        assert self.folder is not None, "SSHWorkers used outside its with block"
        return self.folder / "ssh_config"

    def tx_specs(self) -> list[str]:
        return [worker.tx(self.ssh_config) for worker in self.workers]

    def __enter__(self) -> SSHWorkers:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _start(self) -> None:
        if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
            raise ContainerError("remote workers are reached with OpenSSH's ssh and ssh-keygen, and this machine has "
                                 "none on PATH: install Debian's openssh-client")
        image = ensure_ssh_worker_image()
        # mode 0700: the private key lives here; named on each container, so the reaper removes it with them
        self.folder = Path(tempfile.mkdtemp(prefix=f"{docker_client.FOLDER_PREFIX}ssh-"))
        key = self.folder / "id_ed25519"
        _ok(subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.run, "-f", str(key)],
                           capture_output=True, text=True, timeout=SSH_TIMEOUT), "ssh-keygen")
        public_key = key.with_suffix(".pub").read_bytes()
        files = harness_files()
        for index, install in enumerate(self.installs):
            name = f"rh-{self.run}-w{index}"[:120]
            # sshd needs host keys, made here so each container has its own
            container = docker_client.start(image, role=ROLE, run=self.run, name=name,
                                            command=["sh", "-c", "ssh-keygen -A -q && exec /usr/sbin/sshd -D -e"],
                                            ports={"22/tcp": ("127.0.0.1", None)},
                                            labels={docker_client.FOLDER_LABEL: str(self.folder)})
            worker = SSHWorker(name=f"worker{index}", port=_published_port(container), install=install,
                               workdir=f"{install.rstrip('/')}-work", container=container)
            self.workers.append(worker)
            _put(container, "/root/.ssh", {"authorized_keys": public_key}, folder_mode=0o700, mode=0o600)
            self._install(worker, files)
        known_hosts = []
        for worker in self.workers:
            _wait_for_banner(worker)
            host_key = _exec(worker.container, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).split()[:2]
            known_hosts.append(f"{worker.name} {' '.join(host_key)}\n")
        (self.folder / "known_hosts").write_text("".join(known_hosts))
        self.ssh_config.write_text("".join(self._config_entry(worker, key) for worker in self.workers))
        for worker in self.workers:  # the same way in as execnet: proves the key, the host key and the python
            answer = subprocess.run(["ssh", "-F", str(self.ssh_config), worker.name, worker.python, "-c",
                                     "'import harness, sys; print(harness.__file__)'"],
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SSH_TIMEOUT)
            _ok(answer, f"ssh {worker.name} (127.0.0.1:{worker.port})")
            if not answer.stdout.strip().startswith(worker.install + "/"):
                raise ContainerError(f"on {worker.name} the harness imports from {answer.stdout.strip()}, not from "
                                     f"its install at {worker.install}")

    def _install(self, worker: SSHWorker, files: dict[str, Path | bytes]) -> None:
        """A venv at the worker's own path, on the image's distributions (--system-site-packages), with the
        harness packages and their dist-info in its site-packages: installed as pip would leave them."""
        _exec(worker.container, ["python3", "-m", "venv", "--without-pip", "--system-site-packages", worker.install])
        site = f"{worker.install}/lib/python{PYTHON[0]}.{PYTHON[1]}/site-packages"
        _put(worker.container, site, files)
        _exec(worker.container, [worker.python, "-m", "compileall", "-q", f"{site}/harness",
                                 f"{site}/fake_destinations"])
        project = _project_files(self.project) if self.project else {}
        _exec(worker.container, ["mkdir", "-p", worker.workdir])
        if project:
            _put(worker.container, worker.workdir, project)

    def _config_entry(self, worker: SSHWorker, key: Path) -> str:
        assert self.folder is not None
        # BatchMode: a missing key fails at once instead of asking for a password nobody types
        return (f"Host {worker.name}\n  HostName 127.0.0.1\n  Port {worker.port}\n  User {USER}\n"
                f"  IdentityFile {key}\n  IdentitiesOnly yes\n  HostKeyAlias {worker.name}\n"
                f"  UserKnownHostsFile {self.folder / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
                f"  BatchMode yes\n  LogLevel ERROR\n  ServerAliveInterval 15\n\n")

    def kill(self, index: int) -> None:
        """Kill worker ``index``'s container at once (a machine lost mid-run), leaving it for ``close``."""
        self.workers[index].container.kill()

    def close(self) -> None:
        """Remove the containers and the key folder, each step tried whatever the others do."""
        problems = []
        for worker in self.workers:
            try:
                docker_client.remove(worker.container)
            except ContainerError as exc:
                problems.append(f"{worker.name}: {exc}")
        self.workers = []
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        if problems:
            raise ContainerError("could not remove the ssh workers: " + "; ".join(problems))


def _ok(answer: subprocess.CompletedProcess[str], what: str) -> None:
    if answer.returncode != 0:
        raise ContainerError(f"{what} failed (exit {answer.returncode}): {(answer.stderr or answer.stdout).strip()}")


def _exec(container: Container, argv: list[str]) -> str:
    exit_code, output = container.exec_run(argv, demux=False)
    text = (output or b"").decode(errors="replace")
    if exit_code != 0:
        raise ContainerError(f"in container {container.name}: {' '.join(argv)} failed (exit {exit_code}): "
                             f"{text.strip()[-2000:]}")
    return text


def _put(container: Container, folder: str, files: dict[str, Path | bytes], *, folder_mode: int = 0o755,
         mode: int = 0o644) -> None:
    """Write ``files`` (name relative to ``folder`` -> path or content) into the container, owned by root."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        made: set[str] = set()
        for name in sorted(files):
            parents = PurePosixPath(name).parents
            for parent in reversed(list(parents)[:-1]):
                if str(parent) not in made:
                    made.add(str(parent))
                    info = tarfile.TarInfo(str(parent))
                    info.type, info.mode = tarfile.DIRTYPE, folder_mode
                    tar.addfile(info)
            source = files[name]
            data = source if isinstance(source, bytes) else source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    _exec(container, ["mkdir", "-p", "-m", oct(folder_mode)[2:], folder])
    if not container.put_archive(folder, archive.getvalue()):
        raise ContainerError(f"could not copy {len(files)} file(s) into {container.name}:{folder}")


def _project_files(project: Path) -> dict[str, Path | bytes]:
    """A project folder's files as a checkout has them: no caches, no evidence, no virtual environments."""
    skipped = {"__pycache__", ".pytest_cache", ".venv", "evidence", ".git"}
    return {path.relative_to(project).as_posix(): path for path in sorted(project.rglob("*"))
            if path.is_file() and not skipped & set(path.relative_to(project).parts)}


def _published_port(container: Container) -> int:
    container.reload()
    bindings = (container.attrs.get("NetworkSettings", {}).get("Ports") or {}).get("22/tcp") or []
    ports = [int(b["HostPort"]) for b in bindings if b.get("HostIp") in ("127.0.0.1", "")]
    if not ports:
        raise ContainerError(f"container {container.name} published no port for sshd on 127.0.0.1: {bindings}")
    return ports[0]


def _wait_for_banner(worker: SSHWorker) -> None:
    """Until sshd's banner comes through the published port: the engine's proxy accepts a connection before
    sshd listens, so only the banner proves sshd is there."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with socket.create_connection(("127.0.0.1", worker.port), timeout=5) as connection:
                if connection.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        worker.container.reload()
        if worker.container.status != "running" or time.monotonic() > deadline:
            log = worker.container.logs(tail=20).decode(errors="replace").strip()
            raise ContainerError(f"sshd in {worker.container.name} did not answer on 127.0.0.1:{worker.port} "
                                 f"(container {worker.container.status}): {log or 'no output'}")
        time.sleep(0.1)

