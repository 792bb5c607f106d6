"""The harness's hold on the Docker engine: one client, our labels, start and remove, cleanup of ours.

Every container, network and volume the harness makes carries ``labels(role, run)``: ``io.retry-harness``
marks it ours, ``.owner`` names the harness process that made it (``OWNER``), so that ``ours(OWNER)`` and
``remove_ours(OWNER)`` find exactly what this process left, and ``remove_ours()`` everything of ours
whoever made it (``python -m harness containers clean``).

A container may name a temporary folder of this machine made for it (``FOLDER_LABEL``: the ssh workers' key pair,
``harness.containers.ssh_workers``), removed with it.

Nothing outlives a harness killed with SIGKILL: the first ``client()`` starts this process's reaper
(``python -m harness.containers.reaper OWNER``), which waits for end of file on a pipe whose only write end
this process holds, then removes what ``OWNER`` left. The same idea as ``harness/agent_supervisor.py``.

The harness never pulls: no registry is reachable from where it runs, and a pull would hang.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from harness.errors import ContainerError

if TYPE_CHECKING:
    from docker.client import DockerClient
    from docker.models.containers import Container

LABEL = "io.retry-harness"
OWNER_LABEL, ROLE_LABEL, RUN_LABEL = f"{LABEL}.owner", f"{LABEL}.role", f"{LABEL}.run"
# a temporary folder of this machine made for the container (an ssh key pair): removed with it, by the reaper too
FOLDER_LABEL = f"{LABEL}.folder"
FOLDER_PREFIX = "retry-harness-"  # the only folders FOLDER_LABEL may name, in the temp folder: never another path
ROLES = ("agent", "service", "database", "harness", "build", "worker")
OWNER = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
DEFAULT_ENGINE = "unix:///var/run/docker.sock"
OUR_IMAGE_PREFIX = "retry-harness/"  # the images `python -m harness images build` makes (harness.containers.images)

_lock = threading.Lock()
_client: DockerClient | None = None
_reaper_pipe: IO[bytes] | None = None  # the write end the reaper watches; closed only when this process ends


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE


def connect() -> DockerClient:
    """A new client that answered a ping, else ContainerError saying where no engine answers.

    Only the reaper should call this directly: everyone else shares ``client()``, which also starts the reaper."""
    import docker.client
    import docker.errors

    try:
        made = docker.client.DockerClient.from_env(timeout=60)
        made.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise ContainerError(f"no Docker engine answers at {engine_address()}: {engine_message(exc)}; "
                             f"start dockerd (or set DOCKER_HOST)") from None
    return made


def client() -> DockerClient:
    """This process's one client; the first call also starts the reaper of ``OWNER``'s leftovers."""
    global _client
    with _lock:
        if _client is None:
            made = connect()
            _start_reaper()
            _client = made
        return _client


def _start_reaper() -> None:
    global _reaper_pipe
    # a session of its own: Ctrl-C in the terminal reaches the harness (which cleans up in its finally blocks)
    # and not the reaper, which must outlive the harness to clean up after a harness that could not
    reaper = subprocess.Popen([sys.executable, "-m", "harness.containers.reaper", OWNER], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    _reaper_pipe = reaper.stdin  # never written, never closed: end of file comes with the end of this process


def engine_message(exc: BaseException) -> str:
    """The engine's own words for a docker SDK error, on one line."""
    explanation = getattr(exc, "explanation", None)
    text = explanation if isinstance(explanation, str) and explanation else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def labels(role: str, run: str | None = None, **extra: str) -> dict[str, str]:
    """The labels of everything the harness makes: ours, this process's, in ``role``, for ``run``."""
    if role not in ROLES:
        raise ValueError(f"unknown container role {role!r}; one of {', '.join(ROLES)}")
    return {LABEL: "1", OWNER_LABEL: OWNER, ROLE_LABEL: role, RUN_LABEL: run or "", **extra}


def _filters(owner: str | None) -> dict[str, Any]:
    return {"label": [f"{OWNER_LABEL}={owner}" if owner else LABEL]}


def listing(owner: str | None = None) -> dict[str, list[dict[str, str]]]:
    """Our containers (running or not), networks and volumes, ``owner``'s or every owner's: each one's name,
    role, owner, run, and for a container its image and status."""
    engine = client()
    filters = _filters(owner)

    def row(name: str, marks: dict[str, str] | None, **more: str) -> dict[str, str]:
        marks = marks or {}
        return {"name": name, "role": marks.get(ROLE_LABEL, ""), "owner": marks.get(OWNER_LABEL, ""),
                "run": marks.get(RUN_LABEL, ""), **more}

    containers = [row(c.name, c.labels, image=(c.image.tags or [c.image.short_id])[0] if c.image else "",
                      status=c.status) for c in engine.containers.list(all=True, filters=filters, ignore_removed=True)]
    networks = [row(n.name, n.attrs.get("Labels")) for n in engine.networks.list(filters=filters)]
    volumes = [row(v.name, v.attrs.get("Labels")) for v in engine.volumes.list(filters=filters)]
    return {kind: sorted(rows, key=lambda r: r["name"])
            for kind, rows in (("containers", containers), ("networks", networks), ("volumes", volumes))}


def ours(owner: str | None = None) -> dict[str, list[str]]:
    """Names of our containers (running or not), networks and volumes: ``owner``'s, or every owner's."""
    return {kind: [r["name"] for r in rows] for kind, rows in listing(owner).items()}


def remove_ours(owner: str | None = None, *, engine: DockerClient | None = None) -> dict[str, list[str]]:
    """Remove (force) our containers, then networks, then volumes (``owner``'s, or every owner's); returns the
    names removed. Containers first: a network or volume in use cannot go."""
    import docker.errors

    engine = engine or client()
    filters = _filters(owner)
    removed: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}
    for container in engine.containers.list(all=True, filters=filters):
        if _gone_or_done(lambda c=container: c.remove(force=True, v=True)):
            removed["containers"].append(container.name)
        remove_folder_of(container)
    for network in engine.networks.list(filters=filters):
        if _gone_or_done(network.remove):
            removed["networks"].append(network.name)
    for volume in engine.volumes.list(filters=filters):
        if _gone_or_done(lambda v=volume: v.remove(force=True)):
            removed["volumes"].append(volume.name)
    try:
        engine.networks.prune(filters=filters)  # any the list missed while a container still held it
    except docker.errors.APIError:
        pass
    return {kind: sorted(names) for kind, names in removed.items()}


def _gone_or_done(action: Any) -> bool:
    """Run a removal; False when the object was already gone (removed by someone else meanwhile)."""
    import docker.errors

    try:
        action()
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code == 409 and "in progress" in engine_message(exc):  # another remover got there first
            return False
        raise ContainerError(f"cannot remove {exc}: {engine_message(exc)}") from None
    return True


def image_present(tag: str) -> bool:
    import docker.errors

    try:
        client().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise ContainerError(f"cannot look up image {tag}: {engine_message(exc)}") from None
    return True


def ensure_image(tag: str) -> None:
    """ContainerError naming ``tag`` when the engine does not have it, with how to make it: the harness never
    pulls."""
    if image_present(tag):
        return
    if tag.startswith(OUR_IMAGE_PREFIX):
        how = "build it with `python -m harness images build`"
    else:
        how = f"build it (`docker build -t {tag} FOLDER`) or load it (`docker load -i FILE`) first"
    raise ContainerError(f"image {tag} is not present in the Docker engine at {engine_address()}; {how} "
                         f"(the harness never pulls: no registry is reachable)")


def start(image: str, *, role: str, run: str | None, **docker_kwargs: Any) -> Container:
    """Create and start a container of ``image`` labelled ours (``labels(role, run)`` plus any ``labels=``);
    ``docker_kwargs`` as ``containers.create`` takes them (``network_mode``, ``environment``, ``volumes``,
    ``user``, ``command``, ...). Never pulls: create + start, not ``containers.run``, which pulls a missing
    image. A container that does not start is removed again."""
    import docker.errors

    ensure_image(image)
    own = labels(role, run)
    extra = docker_kwargs.pop("labels", None) or {}
    try:
        container = client().containers.create(image, labels={**extra, **own}, **docker_kwargs)
    except docker.errors.ImageNotFound:
        ensure_image(image)  # gone since the check above: say so as ensure_image does
        raise
    except (docker.errors.APIError, TypeError) as exc:
        raise ContainerError(f"cannot create the {role} container from image {image}: {engine_message(exc)}") from None
    try:
        container.start()
        container.reload()
    except docker.errors.APIError as exc:
        remove(container)
        raise ContainerError(f"cannot start the {role} container from image {image}: {engine_message(exc)}") from None
    return container


def remove(container: Container) -> None:
    """Kill the container if it runs, then remove it with its anonymous volumes; one already gone is fine."""
    import docker.errors

    try:
        container.reload()
        if container.status in ("running", "restarting", "paused"):
            container.kill()
    except docker.errors.NotFound:
        return
    except docker.errors.APIError:
        pass  # stopped meanwhile (409 not running): the forced remove below deals with any state
    _gone_or_done(lambda: container.remove(force=True, v=True))
    remove_folder_of(container)


def remove_folder_of(container: Container) -> None:
    """Remove the temporary folder ``FOLDER_LABEL`` names, if it is one of ours in this machine's temp folder."""
    named = (container.labels or {}).get(FOLDER_LABEL)
    if named:
        folder = Path(named)
        if folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith(FOLDER_PREFIX):
            shutil.rmtree(folder, ignore_errors=True)
