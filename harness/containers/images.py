"""The images the harness builds itself, locally: no registry is reachable, so nothing is ever pulled.

- ``BASE_IMAGE``: Debian bookworm, minbase, with python3 (3.11), ca-certificates and sqlite3, made with
  debootstrap and ``docker import``ed (root and debootstrap needed; ``HARNESS_BASE_IMAGE`` names another
  base with Python 3.11 instead).
- ``retry-harness/runtime:<hash>``: the base plus the harness packages and the distributions they require,
  copied from this environment (no pip, no network): what an agent in a container runs on
  (``python3 -m harness.agents.reference``).
- ``retry-harness/harness:<hash>``: what the runtime has plus mitmproxy's closure: the harness's side (fake
  destinations, the fault proxy, the CLI) for a team whose agent is not Python (docker/compose.yaml).

Both stand on ``retry-harness/dists:<hash>`` images of the distributions alone, so a source change builds
one small layer (``_Recipe``). A tag's hash is of what goes in (the parent's id, the distributions'
versions, the package sources), so a code change builds a new image and an unchanged tree reuses the one it
has. Builds take a file lock, so parallel harness processes (pytest-xdist workers) never build the same
image twice at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

from harness.containers.docker_client import (
    LABEL,
    ROLE_LABEL,
    client,
    engine_address,
    engine_message,
    ensure_image,
    image_present,
)
from harness.contract import BASE_IMAGE_ENV, harness_cache
from harness.errors import ContainerError

BASE_IMAGE = "retry-harness/base:bookworm"
RUNTIME_REPOSITORY = "retry-harness/runtime"
DISTS_REPOSITORY = "retry-harness/dists"  # the distributions' layers under runtime and harness (see _Recipe)
HARNESS_REPOSITORY = "retry-harness/harness"
KIND_LABEL = f"{LABEL}.image"  # base | dists | runtime | harness | ssh-worker | built (a Dockerfile through build())
SITE = "/opt/retry-harness/site"  # the copied packages, on sys.path through a .pth file (below)
PYTHON = (3, 11)  # Debian bookworm's python3: the copied compiled extensions are built for this one
PACKAGES = ("harness", "fake_destinations")
DISTRIBUTION = "retry-harness"
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "ca-certificates", "sqlite3")
RECIPE = "1"  # bump when how an image is made changes, so every tag changes with it
DEBOOTSTRAP_TIMEOUT = 1200.0
BUILD_LOG_TAIL = 30

# On sys.path through a .pth file in the image's own site-packages, not PYTHONPATH: the fault proxy's runtime
# sets a PYTHONPATH of its own (harness/proxy/runtime.py), and the copied packages must still be found then.
# Then what the layer added is compiled once (its folders given as arguments, else all of SITE), so an agent
# started as any user does not compile it at every start.
_INSTALL_SITE = (
    "import compileall, os, site, sys; "
    f"sys.version_info[:2] == {PYTHON} or sys.exit('this image needs Python {PYTHON[0]}.{PYTHON[1]} as python3, "
    "found ' + sys.version.split()[0]); "
    "target = site.getsitepackages()[0]; os.makedirs(target, exist_ok=True); "
    f"open(target + '/retry-harness.pth', 'w').write(\"import site; site.addsitedir('{SITE}')\\n\"); "
    f"[compileall.compile_dir(os.path.join('{SITE}', d), quiet=2, workers=0) for d in sys.argv[1:] or ['']]"
)

_thread_lock = threading.RLock()
_lock_depth = 0


def lock_path() -> Path:
    return harness_cache() / "images.lock"


@contextmanager
def build_lock() -> Iterator[None]:
    """Held while an image is built: across processes (fcntl: pytest-xdist workers, CI jobs), re-entered by the
    thread that holds it (a build that needs another image built first)."""
    global _lock_depth
    with _thread_lock:
        if _lock_depth:
            _lock_depth += 1
            try:
                yield
            finally:
                _lock_depth -= 1
            return
        path = lock_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            _lock_depth = 1
            try:
                yield
            finally:
                _lock_depth = 0


# -- base -------------------------------------------------------------------------------------------

def ensure_base_image() -> str:
    """The base image's tag, made with debootstrap the first time (about a minute), present ever after."""
    chosen = os.environ.get(BASE_IMAGE_ENV)
    if chosen:
        if not image_present(chosen):
            raise ContainerError(f"{BASE_IMAGE_ENV}={chosen}: that image is not present in the Docker engine at "
                                 f"{engine_address()}; build or load an image with Python 3.11 as python3 under "
                                 f"that name, or unset {BASE_IMAGE_ENV} to build {BASE_IMAGE} with debootstrap")
        return chosen
    if image_present(BASE_IMAGE):
        return BASE_IMAGE
    with build_lock():
        if not image_present(BASE_IMAGE):  # another process may have built it while this one waited
            _debootstrap_base()
    return BASE_IMAGE


def _debootstrap_base() -> None:
    problems = [] if os.geteuid() == 0 else ["root (debootstrap makes device nodes and chroots)"]
    if shutil.which("debootstrap") is None:
        problems.append("debootstrap (Debian's package of that name)")
    if problems:
        raise ContainerError(f"building {BASE_IMAGE} needs {' and '.join(problems)}; build it where those are "
                             f"(`python -m harness images build base`), or set {BASE_IMAGE_ENV}=<an image with "
                             f"Python 3.11 as python3> to build on another base")
    work = Path(tempfile.mkdtemp(prefix="retry-harness-base-"))
    root = work / "root"
    try:
        bootstrap = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(root), MIRROR],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT)
        if bootstrap.returncode != 0:
            raise ContainerError(f"debootstrap could not make {BASE_IMAGE} from {MIRROR} (exit "
                                 f"{bootstrap.returncode}):\n{_tail(bootstrap.stdout + bootstrap.stderr)}\n"
                                 f"set {BASE_IMAGE_ENV}=<an image with Python 3.11> to build on another base")
        for waste in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                      "usr/share/info", "usr/share/locale"):
            _empty(root / waste)
        archive = work / "root.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(archive), "."], check=True,
                       capture_output=True, timeout=600)
        repository, tag = BASE_IMAGE.split(":")
        changes = ["ENV LANG=C.UTF-8", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                   'CMD ["python3"]', f"LABEL {LABEL}=1 {KIND_LABEL}=base"]
        answer = _api_call(f"docker import of {BASE_IMAGE}", client().api.import_image, src=str(archive),
                           repository=repository, tag=tag, changes=changes)
        if not image_present(BASE_IMAGE):
            raise ContainerError(f"docker import of {BASE_IMAGE} made no image: {_tail(str(answer))}")
    except subprocess.TimeoutExpired as exc:
        raise ContainerError(f"building {BASE_IMAGE}: {exc.cmd[0]} did not finish in {exc.timeout:.0f} s") from None
    except subprocess.CalledProcessError as exc:
        raise ContainerError(f"building {BASE_IMAGE}: {exc.cmd[0]} failed: {_tail(exc.stderr or b'')}") from None
    finally:
        _remove_work(work)


def _empty(folder: Path) -> None:
    if folder.is_dir() and not folder.is_symlink():
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()


def _remove_work(work: Path) -> None:
    """Remove debootstrap's folder, unmounting first what a killed debootstrap left mounted in it (its /proc,
    /sys): removing through a mount would reach the host's own."""
    prefix = str(work.resolve()) + "/"
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, timeout=60)
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    if any(m.startswith(prefix) for m in mounts):
        print(f"retry-harness: left {work} in place: something is still mounted in it", file=sys.stderr)
        return
    shutil.rmtree(work, ignore_errors=True)


# -- runtime and harness: this environment's packages, copied ----------------------------------------

def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Installed:
    """A distribution of this environment, its metadata read once (importlib.metadata reads it at every ask)."""

    name: str
    version: str
    requires: tuple[str, ...]
    dist: importlib.metadata.Distribution

    def files(self) -> dict[str, Path | bytes]:
        """Its installed files relative to its site-packages (its RECORD), without bytecode (the image compiles
        its own) and without what lies outside site-packages (scripts)."""
        if self.dist.files is None:
            raise ContainerError(f"{self.name} {self.version} has no RECORD of its files in this environment, so "
                                 f"it cannot be copied into an image; reinstall it with pip")
        files: dict[str, Path | bytes] = {}
        for entry in self.dist.files:
            parts = entry.parts
            if not parts or parts[0] == ".." or "__pycache__" in parts or entry.suffix == ".pyc":
                continue
            source = Path(str(self.dist.locate_file(entry)))
            if source.is_file():
                files[entry.as_posix()] = source
        return files


@cache
def _installed() -> dict[str, importlib.metadata.Distribution]:
    """Every distribution on sys.path by canonical name, the first one winning as for imports, an installed
    ``.dist-info`` before a source tree's ``.egg-info`` (left by setuptools, maybe stale): one listing of each
    folder (``importlib.metadata.distribution`` lists them all again for each name it is asked)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    folders = [Path(entry or ".") for entry in sys.path]
    for suffix in (".dist-info", ".egg-info"):
        for folder in folders:
            for child in sorted(folder.glob(f"*{suffix}")) if folder.is_dir() else ():
                if child.is_dir():
                    found.setdefault(_canonical(child.stem.split("-")[0]), importlib.metadata.PathDistribution(child))
    return found


def _read(name: str, wanted_by: str) -> Installed:
    dist = _installed().get(_canonical(name))
    if dist is None:
        raise ContainerError(f"{name} (required by {wanted_by}) is not installed in this environment "
                             f"({sys.prefix}): the image copies what is installed here; install the harness with "
                             f"its dependencies first (pip install -c .ci/constraints.txt -e .)")
    metadata = dist.metadata
    return Installed(metadata["Name"], metadata["Version"], tuple(metadata.get_all("Requires-Dist") or ()), dist)


def closure(requirements: Iterable[str]) -> list[Installed]:
    """The installed distributions ``requirements`` need, transitively, as their markers hold for this
    interpreter (the image's: same Python, same platform); ContainerError names one that is not installed."""
    from packaging.requirements import Requirement

    found: dict[str, Installed] = {}
    done: set[tuple[str, str]] = set()
    roots = [Requirement(text) for text in requirements]
    pending = [(root, "the harness") for root in roots if root.marker is None or root.marker.evaluate({"extra": ""})]
    while pending:
        requirement, wanted_by = pending.pop()
        name = _canonical(requirement.name)
        if name not in found:
            found[name] = _read(requirement.name, wanted_by)
        for extra in ("", *sorted(requirement.extras)):
            if (name, extra) in done:
                continue
            done.add((name, extra))
            for text in found[name].requires:
                needed = Requirement(text)
                if needed.marker is None or needed.marker.evaluate({"extra": extra}):
                    pending.append((needed, found[name].name))
    return [found[name] for name in sorted(found)]


def _runtime_requirements() -> list[str]:
    """retry-harness's own requirements, no extras: what the product imports."""
    return list(_read(DISTRIBUTION, "the image").requires)  # closure() evaluates each marker, extras left out


def _proxy_requirements() -> list[str]:
    from harness.proxy.runtime import REQUIREMENTS

    return list(REQUIREMENTS)


def harness_files() -> dict[str, Path | bytes]:
    """The harness packages from their folders (an editable install records none of them) and the
    distribution's metadata (its version and entry points: the pytest plugin)."""
    files: dict[str, Path | bytes] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        folder = Path(spec.submodule_search_locations[0])
        for source in sorted(folder.rglob("*")):
            relative = source.relative_to(folder.parent)
            if source.is_file() and "__pycache__" not in relative.parts and source.suffix != ".pyc":
                files[relative.as_posix()] = source
    own = _read(DISTRIBUTION, "the image")  # a dist-info, or an egg-info in a source tree
    info = f"{DISTRIBUTION.replace('-', '_')}-{own.version}.dist-info"
    for name, theirs in (("METADATA", "METADATA"), ("METADATA", "PKG-INFO"), ("entry_points.txt", "entry_points.txt")):
        text = own.dist.read_text(theirs)
        if text is not None and f"{info}/{name}" not in files:
            files[f"{info}/{name}"] = text.encode()
    return files


def _check_python() -> None:
    if sys.version_info[:2] != PYTHON:
        raise ContainerError(f"the images copy this environment's packages (compiled extensions included) onto "
                             f"Debian bookworm's Python {PYTHON[0]}.{PYTHON[1]}; this interpreter is "
                             f"{sys.version.split()[0]} ({sys.executable}): build the images from a Python "
                             f"{PYTHON[0]}.{PYTHON[1]} environment")


class _Recipe:
    """One image of ours: one layer on ``parent``, a ``COPY`` into ``SITE`` and a compile, holding
    distributions of this environment or the harness's own files. The tag is a hash of the parent's id, the
    Dockerfile, the distributions' versions and the own files' content (sources change without a version)."""

    def __init__(self, kind: str, repository: str, parent: str, dists: list[Installed],
                 own: dict[str, Path | bytes], tail: list[str]) -> None:
        self.kind, self.parent, self.dists, self.own, self.tail = kind, parent, dists, own, tail
        versions = "\n".join(f"{d.name}=={d.version}" for d in dists)
        digest = hashlib.sha256(f"{RECIPE}\n{_image_id(parent)}\n{versions}\n{self.dockerfile()}".encode())
        for name in sorted(own):
            digest.update(name.encode() + b"\0" + _content(own[name]) + b"\0")
        self.tag = f"{repository}:{digest.hexdigest()[:12]}"

    def dockerfile(self) -> str:
        """FROM, COPY, RUN and the tail: the image's metadata (ENV, CMD, ENTRYPOINT) lives on the distributions'
        images, so the image rebuilt at every source change has no step it does not need; its labels come with
        the build."""
        folders = sorted({name.split("/")[0] for name in self.own if "/" in name})
        run = [json.dumps(_INSTALL_SITE), *folders] if not self.dists else [json.dumps(_INSTALL_SITE)]
        return "\n".join([f"FROM {self.parent}", f"COPY site {SITE}", f"RUN python3 -c {' '.join(run)}",
                          *self.tail, ""])

    def context(self) -> IO[bytes]:
        """The build context as a tar in a temporary file: the Dockerfile and ``site/``."""
        files: dict[str, Path | bytes] = {"Dockerfile": self.dockerfile().encode(), "site/": b""}
        for dist in self.dists:
            files.update({f"site/{name}": source for name, source in dist.files().items()})
        files.update({f"site/{name}": source for name, source in self.own.items()})
        archive = tempfile.TemporaryFile()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for name in sorted(files):
                source = files[name]
                if name.endswith("/"):
                    info = _plain(tarfile.TarInfo(name.rstrip("/")))
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif isinstance(source, bytes):
                    info = _plain(tarfile.TarInfo(name))
                    info.size, info.mode = len(source), 0o644
                    tar.addfile(info, io.BytesIO(source))
                else:
                    tar.add(source, arcname=name, recursive=False, filter=_plain)
        archive.seek(0)
        return archive


def _content(source: Path | bytes) -> bytes:
    return source if isinstance(source, bytes) else source.read_bytes()


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Files owned by root, readable by everyone: the image runs its agents as the harness's user."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = info.mode | 0o444 | (0o111 if info.mode & 0o100 else 0)
    return info


def _image_id(tag: str) -> str:
    return str(client().images.get(tag).id)


# Images in a chain, ordered by how often their layer changes: the distributions (a version changes rarely) in
# images of their own, then the harness's own files (every edit) on top. A source change builds only the top
# image, from a context of the harness's files alone.
_RUNTIME_TAIL = ["ENV LANG=C.UTF-8 PYTHONUNBUFFERED=1", 'CMD ["python3"]']
_HARNESS_TAIL = ['ENTRYPOINT ["python3", "-m", "harness"]', 'CMD ["--help"]']  # on top of _RUNTIME_TAIL


def _runtime_dists() -> str:
    """The image of the distributions the runtime copies, on the base."""
    _check_python()
    return _ensure(_Recipe("dists", DISTS_REPOSITORY, ensure_base_image(), closure(_runtime_requirements()), {},
                           _RUNTIME_TAIL))


def _proxy_dists() -> str:
    """The runtime's distributions plus mitmproxy 11's closure (what the fault proxy's process imports)."""
    runtime_dists = _runtime_dists()
    have = {d.name for d in closure(_runtime_requirements())}
    try:
        proxy = [d for d in closure(_proxy_requirements()) if d.name not in have]
    except ContainerError as exc:
        raise ContainerError(f"the harness image adds the fault proxy's mitmproxy 11 from this environment: {exc} "
                             f"(the test extra has it: pip install -c .ci/constraints.txt -e '.[test]')") from None
    return _ensure(_Recipe("dists", DISTS_REPOSITORY, runtime_dists, proxy, {}, _HARNESS_TAIL))


def _ensure(recipe: _Recipe) -> str:
    if image_present(recipe.tag):
        return recipe.tag
    with build_lock():
        if not image_present(recipe.tag):  # another process may have built it while this one waited
            with recipe.context() as context:
                _build(context, recipe.tag, f"the {recipe.kind} image", labels={LABEL: "1", KIND_LABEL: recipe.kind},
                       custom_context=True)
    return recipe.tag


def ensure_runtime_image() -> str:
    """``retry-harness/runtime:<hash>``, built when this tree's packages have no image yet: what agents run on."""
    return _ensure(_Recipe("runtime", RUNTIME_REPOSITORY, _runtime_dists(), [], harness_files(), []))


def ensure_harness_image() -> str:
    """``retry-harness/harness:<hash>``: the runtime's content and mitmproxy 11; entry point ``python3 -m harness``."""
    return _ensure(_Recipe("harness", HARNESS_REPOSITORY, _proxy_dists(), [], harness_files(), []))


SSH_WORKER_REPOSITORY = "retry-harness/ssh-worker"
SSH_WORKER_PACKAGES = ("openssh-server",)
# Debian's sshd, from the mirror, on the distributions the harness image has (mitmproxy included: a worker runs
# the fault proxy) but not the harness itself: each worker installs it at a path of its own
# (harness/containers/ssh_workers.py), so a source change rebuilds no image. /run/sshd is sshd's privilege
# separation folder, which the package makes only at boot.
_SSH_WORKER_DOCKERFILE = """FROM {parent}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {packages} \\
    >/dev/null && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*key* && mkdir -p /run/sshd
ENTRYPOINT []
CMD ["/usr/sbin/sshd", "-D", "-e"]
"""


def ensure_ssh_worker_image() -> str:
    """``retry-harness/ssh-worker:<hash>``: a machine for a remote pytest-xdist worker (sshd, Python 3.11, the
    harness's distributions and mitmproxy's), the harness left to install; apt reaches a Debian mirror the first
    time. The hash is of the parent's id and the Dockerfile, so it is built once and reused."""
    parent = _proxy_dists()
    dockerfile = _SSH_WORKER_DOCKERFILE.format(parent=parent, packages=" ".join(SSH_WORKER_PACKAGES))
    digest = hashlib.sha256(f"{RECIPE}\n{_image_id(parent)}\n{dockerfile}".encode()).hexdigest()[:12]
    tag = f"{SSH_WORKER_REPOSITORY}:{digest}"
    if image_present(tag):
        return tag
    with build_lock():
        if not image_present(tag):  # another process may have built it while this one waited
            context = tempfile.TemporaryFile()
            with context:
                with tarfile.open(fileobj=context, mode="w") as tar:
                    info = _plain(tarfile.TarInfo("Dockerfile"))
                    info.size, info.mode = len(dockerfile.encode()), 0o644
                    tar.addfile(info, io.BytesIO(dockerfile.encode()))
                context.seek(0)
                _build(context, tag, "the ssh worker image", labels={LABEL: "1", KIND_LABEL: "ssh-worker"},
                       custom_context=True)
    return tag


def tag_latest(tag: str) -> str:
    """Also tag ``tag`` as its repository's ``latest`` (what docker/compose.yaml runs by default)."""
    repository = tag.rsplit(":", 1)[0]
    _api_call(f"tagging {tag} as latest", client().images.get(tag).tag, repository=repository, tag="latest")
    return f"{repository}:latest"


ENSURE = {"base": ensure_base_image, "runtime": ensure_runtime_image, "harness": ensure_harness_image,
          "ssh-worker": ensure_ssh_worker_image}


def build(context: Path, tag: str, *, role: str = "build") -> str:
    """Build a team's Dockerfile in ``context`` as ``tag`` (its ``FROM`` one of ours or any image present:
    nothing is pulled), host networking, intermediate containers removed; returns ``tag``."""
    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file():
        raise ContainerError(f"{context}: no Dockerfile there to build {tag} from")
    for parent in _parents(dockerfile.read_text(errors="replace")):
        ensure_image(parent)  # the engine would try to pull it, from a registry no one reaches here
    with build_lock():
        # a kind of its own, not the one it inherits from its FROM
        _build(str(context), tag, f"image {tag} from {context}",
               labels={LABEL: "1", ROLE_LABEL: role, KIND_LABEL: "built"})
    return tag


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE | re.MULTILINE)


def _parents(dockerfile: str) -> list[str]:
    """The images a Dockerfile builds FROM, less its own stages, ``scratch`` and names an ARG fills in."""
    stages: set[str] = set()
    parents = []
    for image, stage in _FROM.findall(dockerfile):
        if image.lower() not in stages and image != "scratch" and "$" not in image:
            parents.append(image)
        if stage:
            stages.add(stage.lower())
    return parents


def _build(context: Any, tag: str, what: str, *, labels: dict[str, str], custom_context: bool = False) -> None:
    """One ``docker build`` through the SDK's low-level API (its log streamed, so a failure shows its tail)."""
    import docker.errors

    log: list[str] = []
    source = {"fileobj": context, "custom_context": True} if custom_context else {"path": context}
    try:
        for chunk in client().api.build(tag=tag, labels=labels, network_mode="host", rm=True, forcerm=True,
                                        pull=False, decode=True, **source):
            if "stream" in chunk:
                log.extend(chunk["stream"].splitlines())
            if "error" in chunk:
                raise ContainerError(f"cannot build {what}: {chunk['error'].strip()}\n{_tail(log)}")
    except docker.errors.APIError as exc:
        raise ContainerError(f"cannot build {what}: {engine_message(exc)}\n{_tail(log)}") from None


def _api_call(what: str, call: Any, **kwargs: Any) -> Any:
    import docker.errors

    try:
        return call(**kwargs)
    except docker.errors.APIError as exc:
        raise ContainerError(f"{what} failed: {engine_message(exc)}") from None


def _tail(text: str | bytes | list[str]) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = text if isinstance(text, list) else text.splitlines()
    return "\n".join(line for line in lines[-BUILD_LOG_TAIL:] if line.strip())


def our_images() -> list[dict[str, Any]]:
    """Every image of ours the engine has, oldest first within a kind: tags, kind, size, created, id."""
    rows = []
    for image in client().images.list(filters={"label": f"{LABEL}=1"}):
        rows.append({"tags": sorted(image.tags), "kind": image.labels.get(KIND_LABEL, ""),
                     "size": int(image.attrs.get("Size", 0)), "created": str(image.attrs.get("Created", "")),
                     "id": image.short_id.removeprefix("sha256:")})
    return sorted(rows, key=lambda r: (r["kind"], r["created"]))


def prune() -> list[str]:
    """Remove our runtime, harness, ssh-worker and distributions images, which source and version changes make anew; the
    next run builds what it needs. The base stays (debootstrap takes a minute and it never changes), and so
    does any image a container or another image still uses. Returns the tags removed."""
    import docker.errors

    removed = []
    ours = (f"{RUNTIME_REPOSITORY}:", f"{HARNESS_REPOSITORY}:", f"{DISTS_REPOSITORY}:", f"{SSH_WORKER_REPOSITORY}:")
    for row in sorted(our_images(), key=lambda r: r["kind"] == "dists"):  # the images on a dists image first
        for tag in row["tags"]:
            if not tag.startswith(ours):
                continue  # an image built FROM one of ours carries its labels too
            try:
                client().images.remove(tag)
            except docker.errors.ImageNotFound:
                continue
            except docker.errors.APIError as exc:
                if exc.status_code == 409:  # in use by a container, or an image built on it
                    continue
                raise ContainerError(f"cannot remove image {tag}: {engine_message(exc)}") from None
            removed.append(tag)
    return removed
