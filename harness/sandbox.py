"""The agent's sandbox: each run of a process agent inside bubblewrap (``bwrap``), Linux's well-kept tool for
unprivileged namespaces (Debian's ``bubblewrap`` package; ``HARNESS_BWRAP`` names another binary).

What the sandbox gives (docs/contract.md, "the trust model"):

- **its own PID namespace** (``--unshare-pid``, a /proc of its own): the agent sees none of the harness's,
  the proxy's or the destinations' processes, so it can neither trace them nor read their memory or
  environment. The supervisor is the namespace's init (``--as-pid-1``): when it ends (the agent exited, the
  time limit, a planned crash, or the harness gone: it reads end of file on its watch pipe) the kernel kills
  every process in it, ``setsid`` and double fork or not, and the agent can neither kill nor stop it (an
  init takes no signal from inside it but those it handles). Not ``--die-with-parent`` nor ``--info-fd``:
  a harness killed while bubblewrap starts would leave bubblewrap's first child blocked for ever on the
  word of a parent that died (containers/bubblewrap#633), a process no one ends.
- **its own user namespace** (``--unshare-user``, ``--cap-drop ALL``): root outside is no root inside, so the
  mounts below cannot be undone from within.
- **its own mount namespace**: the machine read-only; a fresh temp folder; the evidence root (this run's and
  every other run's evidence), the temp folder (the destination pools and their live ledgers), the harness's
  cache (``~/.cache/retry-harness``, its SDK environments excepted), the proxy's CA folder and the operator's
  key file out of sight; the only writable places are the agent's audit log, its trace file and its state
  dir; its intents file and the proxy's CA certificate read-only; its working folder and its own code (the
  command's words that are files) read-only.
- **at most ``AGENT_PIDS_LIMIT`` processes** (``pids_ceiling``, a pids cgroup, unsandboxed runs too): a fork bomb
  stops there rather than at the machine's limit, and whatever is left in the cgroup at the end is killed.
- the **network** is shared: the agent reaches the fault proxy on 127.0.0.1 as the contract says; the gate
  (``X-Harness-Gate``) refuses whatever skips the proxy. ``network: isolated`` containers reach the proxy alone.

``HARNESS_SANDBOX``: ``auto`` (the default: bubblewrap where it works, else unsandboxed, said in the verdict),
``bwrap`` (bubblewrap or an error), ``off`` (unsandboxed, said in the verdict; ``run --no-sandbox``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.chain import key_store
from harness.contract import BWRAP_ENV, CHECKPOINT_KEY_FILE_ENV, SANDBOX_ENV, harness_cache, sdk_envs_root
from harness.errors import AgentError

SANDBOX_SETTINGS = ("auto", "bwrap", "off")
# what running unsandboxed gives up, said in every unsandboxed verdict (docs/contract.md, the trust model)
UNSANDBOXED_GIVES_UP = ("the agent can see and trace the harness's and the destinations' processes, read and write "
                        "whatever the user can (other runs' evidence, the harness's files), and a process it starts "
                        "outside its process group is found only by the contract environment it inherited")
# processes and threads one agent run may hold at once, in a pids cgroup or a container (--pids-limit): a fork bomb
# stops here; a thread counts as a process, and an agent's thread pools stay well below it
AGENT_PIDS_LIMIT = 1024
_CGROUP_PREFIX = "retry-harness-"
_NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")


@dataclass(frozen=True)
class Sandbox:
    """How an agent's runs are confined: ``bwrap`` the path of bubblewrap, or None and ``description`` says
    why not (it starts "unsandboxed: "). ``description`` is what the run's verdict says."""

    bwrap: str | None
    description: str

    @property
    def confined(self) -> bool:
        return self.bwrap is not None


# what a bubblewrap run's description says of its namespaces (``AgentRun.sandbox``): one spelling, written and read
BWRAP_NAMESPACES = "own PID, user, mount and IPC namespaces"


def dies_with_its_kill(description: str | None) -> bool:
    """Whether a run so confined (``AgentRun.sandbox``) left nothing running once the harness killed it: bubblewrap's
    PID namespace dies with its first process, setsid and double fork included (tests/engine/test_crash_verified.py).
    Unsandboxed, or in a container the harness may not own, a killed run's process may live on."""
    return description is not None and BWRAP_NAMESPACES in description


def unsandboxed(why: str) -> Sandbox:
    return Sandbox(None, f"unsandboxed: {why}; {UNSANDBOXED_GIVES_UP}")


def choose_sandbox(setting: str | None = None) -> Sandbox:
    """The sandbox of this process's agent runs: ``setting`` (one of ``SANDBOX_SETTINGS``), else
    ``HARNESS_SANDBOX``, else ``auto``. ``bwrap`` where none can be had is an ``AgentError`` saying why."""
    setting = (setting or os.environ.get(SANDBOX_ENV) or "auto").strip().lower()
    if setting not in SANDBOX_SETTINGS:
        raise AgentError(f"{SANDBOX_ENV}={setting!r} is not one of {', '.join(SANDBOX_SETTINGS)}")
    if setting == "off":
        return unsandboxed(f"turned off ({SANDBOX_ENV}=off or --no-sandbox)")
    found = _bubblewrap(os.environ.get(BWRAP_ENV) or shutil.which("bwrap") or "", sys.platform)
    if setting == "bwrap" and not found.confined:
        raise AgentError(f"{SANDBOX_ENV}=bwrap but {found.description.split(';')[0]}")
    return found


@functools.cache
def _bubblewrap(path: str, platform: str) -> Sandbox:
    """Bubblewrap at ``path`` if it makes the namespaces here (tried once per process: a kernel or a container
    may refuse user namespaces), else why not."""
    if not platform.startswith("linux"):
        return unsandboxed(f"bubblewrap needs Linux namespaces, this is {platform}")
    if not path:
        return unsandboxed(f"no bubblewrap (bwrap) on PATH (Debian: apt-get install bubblewrap; or set {BWRAP_ENV})")
    try:
        tried = subprocess.run([path, *_NAMESPACES, "--as-pid-1", "--ro-bind", "/", "/", "--proc", "/proc",
                                "true"], capture_output=True, text=True, timeout=10)
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return unsandboxed(f"bubblewrap at {path} cannot run: {exc}")
    if tried.returncode != 0:
        why = (tried.stderr.strip().splitlines() or [f"exit status {tried.returncode}"])[0]
        return unsandboxed(f"bubblewrap cannot make namespaces here ({why})")
    return Sandbox(path, f"{version or 'bubblewrap'}: {BWRAP_NAMESPACES}; writable: the agent's "
                         "log, trace and state dir only; the harness's files out of sight; network shared (loopback)")


@dataclass(frozen=True)
class AgentFiles:
    """What one run of the agent may touch: ``writable`` (its log and trace files, its state dir), ``readable``
    (its intents file, the proxy's CA certificate), ``hidden`` (folders and files it must not see), its working
    folder ``cwd`` and its ``code`` (the command's words that name files or folders)."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...]
    hidden: tuple[Path, ...]
    cwd: Path
    code: tuple[Path, ...] = ()


def hidden_paths(evidence_root: Path, extra: Iterable[Path] = ()) -> tuple[Path, ...]:
    """The harness's own places an agent must not see: the evidence root, the harness's cache, the runs' key store
    (wherever HARNESS_KEY_STORE puts it), the operator's key file (the temp folder is always replaced), and
    ``extra`` (the proxy's CA folder)."""
    key = os.environ.get(CHECKPOINT_KEY_FILE_ENV)
    return tuple(p for p in (evidence_root, harness_cache(), key_store(), *extra, *([Path(key)] if key else [])))


def command_paths(argv: Sequence[str], cwd: Path) -> tuple[Path, ...]:
    """The words of an agent's command that name a file or folder (its interpreter, its script), absolute."""
    found = []
    for word in argv:
        if word.startswith("-") or "/" not in word and not word.endswith((".py", ".js", ".sh")):
            continue
        path = (cwd / word) if not os.path.isabs(word) else Path(word)
        if path.exists():
            found.append(path.absolute())
    return tuple(found)


def bwrap_argv(sandbox: Sandbox, files: AgentFiles) -> list[str]:
    """The bubblewrap words that put one run of the agent in its sandbox, before the command itself.

    Order matters (a later mount covers an earlier one): the machine read-only, a new temp folder, the
    working folder, then the harness's places hidden, then the agent's code, files and state dir laid back."""
    assert sandbox.bwrap is not None
    temp = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")}
    words = [sandbox.bwrap, *_NAMESPACES, "--as-pid-1", "--new-session", "--cap-drop", "ALL",
             "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for folder in sorted(temp):
        if folder.is_dir():
            words += ["--tmpfs", str(folder)]
    hidden = [p.resolve() for p in files.hidden if p.exists()]
    if not any(_within(t, files.cwd) for t in temp):  # a folder above the temp folder is visible already
        words += ["--ro-bind", str(files.cwd), str(files.cwd)]
    for path in hidden:
        words += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    cache_envs = sdk_envs_root()  # the certified SDKs' environments: agents run in them
    if cache_envs.is_dir():
        words += ["--ro-bind", str(cache_envs), str(cache_envs)]
    covered = [*temp, *hidden]
    # the harness's own environment runs the supervisor (and `python -m ...` agents): it may be a venv in the temp
    # folder (a wheel installed for a test, a CI job's)
    for code in (Path(sys.prefix), *files.code):
        if not _within(code, *covered):
            continue  # seen through the read-only machine already
        # an interpreter's whole environment (its site-packages, its pyvenv.cfg), a script's folder (its siblings
        # may be imported), or the file alone where that folder holds more
        shown = _environment_of(code) or (code.parent if code.is_file() else code)
        if any(_within(c, shown) for c in covered):
            shown = code
        if not any(_within(h, shown) for h in hidden):  # nothing hidden is laid back
            words += ["--ro-bind", str(shown), str(shown)]
    for path in files.readable:
        words += ["--ro-bind", str(path), str(path)]
    for path in files.writable:
        words += ["--bind", str(path), str(path)]
    return words + ["--chdir", str(files.cwd), "--"]


# Libraries keep data and caches under the user's home (crewAI its task database, Hugging Face its models); the home
# is read-only in the sandbox, so they write into its fresh temp folder instead, thrown away with the run
SCRATCH_ENV = {"XDG_DATA_HOME": "/tmp/agent-home/data", "XDG_CACHE_HOME": "/tmp/agent-home/cache",
               "XDG_STATE_HOME": "/tmp/agent-home/state"}


def _environment_of(path: Path) -> Path | None:
    """The virtual environment ``path`` is, or is the interpreter of (``ENV/bin/python``): the folder holding
    ``pyvenv.cfg``; None for anything else."""
    for folder in (path, path.parent.parent):
        if (folder / "pyvenv.cfg").is_file():
            return folder
    return None


def _within(path: Path, *folders: Path) -> bool:
    """Whether ``path`` is one of ``folders`` or inside one."""
    return any(path == folder or folder in path.parents for folder in folders)


@contextlib.contextmanager
def pids_ceiling(limit: int = AGENT_PIDS_LIMIT) -> Iterator[tuple[list[str], str]]:
    """``(prefix, said)``: a command prefix that moves the process it starts, and whatever that forks, into a fresh
    pids cgroup holding at most ``limit`` tasks, and what the run's sandbox line says of it. Where no cgroup can be
    made (not root, no pids controller: a bubblewrap user namespace cannot make one) the prefix is empty and the line
    says that only the time limit bounds a fork bomb. Whatever is left in the cgroup at the end is killed (they are
    the run's processes, whatever session they took) and the cgroup removed."""
    folder = _new_pids_cgroup(limit)
    if folder is None:
        yield [], "no process ceiling (no pids cgroup can be made here): only the time limit bounds a fork bomb"
        return
    try:
        # the shell enters the cgroup before it becomes the supervisor (exec): nothing forks outside it first
        yield ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(folder / "cgroup.procs")], \
            f"at most {limit} processes (a pids cgroup)"
    finally:
        _remove_cgroup(folder)


def _pids_hierarchy() -> Path | None:
    """Where pids cgroups are made: cgroup v1's pids hierarchy, else a cgroup v2 root that delegates pids."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in mounts:
        fields, _, rest = line.partition(" - ")
        kind, _, options = (rest.split(" ") + ["", "", ""])[:3]
        point = Path(fields.split(" ")[4])
        if kind == "cgroup" and "pids" in options.split(","):
            return point
        if kind == "cgroup2" and v2 is None:
            v2 = point
    try:
        if v2 is not None and "pids" in (v2 / "cgroup.subtree_control").read_text().split():
            return v2
    except OSError:
        pass
    return None


def _new_pids_cgroup(limit: int) -> Path | None:
    hierarchy = _pids_hierarchy()
    if hierarchy is None:
        return None
    _sweep(hierarchy)
    folder = hierarchy / f"{_CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        folder.mkdir()
    except OSError:
        return None
    try:
        (folder / "pids.max").write_text(str(limit))
    except OSError:
        _remove_cgroup(folder)
        return None
    return folder


def _sweep(hierarchy: Path) -> None:
    """Remove the cgroups a harness killed outright left behind (their maker's pid is gone; empty, or rmdir fails)."""
    with contextlib.suppress(OSError):
        for folder in hierarchy.glob(f"{_CGROUP_PREFIX}*"):
            maker = folder.name[len(_CGROUP_PREFIX):].split("-")[0]
            if maker.isdigit() and not Path(f"/proc/{maker}").exists():
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _remove_cgroup(folder: Path, patience: float = 5.0) -> None:
    """Kill what is left in ``folder`` and remove it, within ``patience`` seconds (then it stays, swept later)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            left = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            left = []
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)
