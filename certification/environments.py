"""One virtual environment per certified package version, made with uv and kept in the user's cache, so a cell
certifies the SDK release asked for (the current one by default) and not whatever the harness's own environment
holds. A connector imports only its SDK, the bare HTTP clients and ``_harness.py`` (beside it): the environment
holds that and nothing else, never the harness, never mitmproxy (whose h11 pin locks SDKs out of their current
releases).

``environment("openai==3.51.0")`` makes (once) and returns it; ``environment("openai")`` resolves the newest
release first (``uv pip compile``), so it is cached under its version too. ``HARNESS_SDK_ENVS`` chooses the
folder (default ``~/.cache/retry-harness/sdk-envs``); a half-made environment (a killed run) is made again, and
parallel processes wait on a file lock for the one making it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.contract import SDK_ENVS_ENV, sdk_envs_root

ENVS_ENV = SDK_ENVS_ENV
SOURCE = Path(__file__).resolve().parents[1]  # the checkout: its pyproject.toml and the harness's sources
# the HTTP clients connectors use bare, at the versions the matrix was measured with (unless one is the SDK asked)
BARE_CLIENTS = {"requests": "2.34.2", "urllib3": "2.8.0", "httpx": "0.28.1"}
MAKE_TIMEOUT = 600.0  # a cold cache downloads the SDK and its dependencies
BYTECODE_MARK = ".bytecode"  # the environment's modules are byte-compiled


class EnvironmentError_(Exception):  # noqa: N801  (the builtin EnvironmentError is OSError)
    """The environment could not be made: says which requirement, and what uv said."""


@dataclass(frozen=True)
class Environment:
    """A made environment: its interpreter, and the version of every distribution in it."""

    python: Path
    versions: dict[str, str]

    def version(self, package: str) -> str:
        """The installed version of ``package`` (a requirement's name; its extras, ``[client]``, ignored)."""
        return self.versions.get(canonicalize_name(package.split("[", 1)[0]), "?")


def default_root() -> Path:
    return sdk_envs_root()


def uv() -> str:
    """The uv binary of the `certify` extra's uv package (a clear error when it is missing)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        raise EnvironmentError_("uv is not installed: pip install -e '.[certify]' (it makes the SDK environments)") \
            from None
    return str(find_uv_bin())


def parse(requirement: str, flag: str = "--sdk") -> Requirement:
    """A requirement as pip takes it (``openai``, ``openai==3.51.0``); a bad one names itself (given to ``flag``)
    and what is valid."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement as exc:
        raise EnvironmentError_(f"{flag} {requirement!r} is not a requirement ({str(exc).splitlines()[0]}); give NAME "
                                f"or NAME==VERSION, "
                                f"e.g. openai==3.51.0") from None
    if parsed.url or parsed.marker:
        raise EnvironmentError_(f"{flag} {requirement!r}: give NAME or NAME==VERSION, without URL or marker")
    return parsed


def pinned(requirement: str) -> str:
    """``NAME==VERSION`` for a requirement: as given when it pins one version, else the newest release that
    satisfies it, as uv resolves it for this Python."""
    parsed = parse(requirement)
    specs = list(parsed.specifier)
    if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
        return f"{canonicalize_name(parsed.name)}=={specs[0].version}"
    done = _uv(["pip", "compile", "-", "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                "--no-header", "--no-annotate", "--quiet"], stdin=str(parsed), what=f"resolve {requirement}")
    name = canonicalize_name(parsed.name)
    for line in done.splitlines():
        found = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line.strip())
        if found and canonicalize_name(found[1]) == name:
            return f"{name}=={found[2]}"
    raise EnvironmentError_(f"uv resolved {requirement!r} without naming {name}: {done[-500:]}")


def environment(requirement: str, root: Path | None = None) -> Environment:
    """The environment holding ``requirement`` (pinned first) and the bare clients; made once, then reused."""
    exact = pinned(requirement)
    name = exact.split("==", 1)[0]
    wanted = [exact, *(f"{client}=={v}" for client, v in BARE_CLIENTS.items() if client != name)]
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return _made((root or default_root()) / f"{python}-{exact.replace('==', '-')}", wanted,
                 f"install {exact} (beside {', '.join(wanted[1:])})" if wanted[1:] else f"install {exact}")


def harness_environment(requirements: Sequence[str], root: Path | None = None) -> Environment:
    """An environment for agents that import the harness (the framework agents: harness.instrument, the tools):
    the harness's own dependencies (pyproject.toml's, never the test extra's mitmproxy), the harness's sources
    on its path (a .pth file to this checkout) and ``requirements``, all resolved together: what a team gets
    by installing the harness beside those releases. Keyed by all three, so a new pin or checkout makes another."""
    core = tomllib.loads((SOURCE / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    wanted = [*core, *requirements]
    key = hashlib.sha256(json.dumps([sorted(wanted), str(SOURCE)]).encode()).hexdigest()[:12]
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return _made((root or default_root()) / f"{python}-harness-{key}", wanted,
                 f"install {', '.join(requirements)} beside the harness's dependencies", source=SOURCE)


def _made(folder: Path, wanted: list[str], what: str, source: Path | None = None) -> Environment:
    """The environment in ``folder`` holding ``wanted``, made once; ``what`` names it in an error ("install ...")."""
    complete = folder / ".complete.json"
    if not complete.exists():
        _make(folder, wanted, what, source)
    elif not (folder / BYTECODE_MARK).exists():
        _compile(folder)
    return Environment(folder / "bin" / "python", json.loads(complete.read_text(encoding="utf-8")))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The environment in ``folder`` to this process alone: another may be making or compiling it right now."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _site(folder: Path) -> Path:
    [site] = (folder / "lib").glob("python*/site-packages")
    return site


def _compile(folder: Path) -> None:
    """Byte-compile an environment made before its installs were (once)."""
    with _locked(folder):
        if (folder / BYTECODE_MARK).exists():
            return
        subprocess.run([str(folder / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", str(_site(folder))],
                       capture_output=True, timeout=MAKE_TIMEOUT)  # a file that does not compile is left as it is
        (folder / BYTECODE_MARK).touch()


def _make(folder: Path, wanted: list[str], what: str, source: Path | None) -> None:
    with _locked(folder):
        if (folder / ".complete.json").exists():
            return
        shutil.rmtree(folder, ignore_errors=True)
        try:
            _uv(["venv", "--quiet", "--python", sys.executable, str(folder)], what=f"make {folder}")
            # compiled now: an agent runs in a sandbox where the environment is read-only, and would otherwise
            # compile every module it imports at each start (crewAI's import: 4.3 s of CPU against 2.3 s)
            _uv(["pip", "install", "--quiet", "--compile-bytecode", "--python", str(folder / "bin" / "python"),
                 *wanted], what=what)
            if source is not None:  # the sources themselves, as an editable install would put them
                (_site(folder) / "retry-harness-source.pth").write_text(f"{source}\n", encoding="utf-8")
            listed = _uv(["pip", "list", "--format", "json", "--python", str(folder / "bin" / "python")],
                         what=f"list {folder}")
        except EnvironmentError_:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        versions = {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed)}
        (folder / BYTECODE_MARK).touch()
        (folder / ".complete.json").write_text(json.dumps(versions, sort_keys=True) + "\n", encoding="utf-8")


def _uv(args: list[str], *, what: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run([uv(), *args], input=stdin, capture_output=True, text=True, timeout=MAKE_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentError_(f"uv could not {what}: {exc}") from None
    if done.returncode != 0:
        raise EnvironmentError_(f"uv could not {what}: {why_not(done.stderr)}")
    return done.stdout


def why_not(stderr: str) -> str:
    """uv's failure in one line: the release that does not exist (and the newest that does), the package that does
    not, the pins that conflict (uv's own reasoning, joined), else uv's last line."""
    text = " ".join(stderr.split())
    if missing := re.search(r"there is no version of (\S+?)(?: and |, |\.? ?$)", text):
        return f"no such version: {missing[1]}{_newest(missing[1])}"
    if unknown := re.search(r"(\S+) was not found in the package registry", text):
        return f"no such package: {unknown[1]}"
    depends = list(dict.fromkeys(re.findall(r"(\S+ depends on \S+?),? (?:and|we) ", text)))
    if depends:  # uv's chain of reasons, as the pins it starts from and the dependencies that clash with them
        asked = dict.fromkeys(found.rstrip(".,") for found in re.findall(r"(?<!conclude that )you require (\S+)", text))
        return f"conflicting pins: {'; '.join(depends)}; asked for {', '.join(asked)}"
    if "Because " in text:
        reason = text[text.index("Because ") + len("Because "):]
        return re.sub(r",? we can conclude that your requirements are unsatisfiable\.?", "", reason).strip()
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "uv gave no reason"


def _newest(requirement: str) -> str:
    """``"; the newest is NAME==VERSION"`` for a requirement that names no release uv finds ("" when none resolves)."""
    try:
        name = Requirement(requirement).name
    except InvalidRequirement:
        return ""
    if name == requirement:  # the bare name has no release: there is nothing newer to name
        return ""
    try:
        return f"; the newest is {pinned(name)}"
    except EnvironmentError_:
        return ""
