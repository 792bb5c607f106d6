"""The interpreter the fault proxy runs under: one that has mitmproxy 11, never the agent's own packages.

Found in this order:

1. ``HARNESS_PROXY_PYTHON``: an interpreter the user chose (a venv of their own, a container's);
2. this interpreter, when mitmproxy is installed beside the harness (the project's own test venv);
3. a private venv under the user's cache folder (``HARNESS_PROXY_VENV`` to choose where), made on
   first use with pip (mitmproxy and pydantic, nothing else) and reused by every later run. A file
   lock lets parallel harness processes (pytest-xdist workers, CI jobs) wait for one another.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import notices
from harness.contract import MITMPROXY_TOOLS, harness_cache
from harness.contract import PROXY_PYTHON_ENV as PYTHON_ENV
from harness.contract import PROXY_VENV_ENV as VENV_ENV

# what the proxy process imports besides the harness package itself (harness.proxy.rules is pydantic)
REQUIREMENTS = ("mitmproxy>=11.0,<12", "pydantic>=2.6")
INSTALL_TIMEOUT = 600.0


class RuntimeError_(Exception):  # noqa: N801 - not the builtin, which it would shadow
    """The proxy's interpreter cannot be found or made; the message says what to do."""


def runtime_env(path_folder: Path) -> dict[str, str]:
    """The proxy process's environment: ``path_folder`` (a link to the harness package) is all of its
    PYTHONPATH, so neither the caller's PYTHONPATH nor the agent's site-packages reach it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONPATH": str(path_folder), "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1"}


def link_package(folder: Path) -> Path:
    """Put a link to the harness package in ``folder`` (the runtime's PYTHONPATH, see ``runtime_env``)."""
    (folder / "harness").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
    return folder


def run_module(module: str, args: list[str], *, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    """``python -m MODULE ARGS`` under the proxy's interpreter (a module of ``harness.proxy`` that may import
    mitmproxy), its output captured; RuntimeError_ when that interpreter cannot be found or made."""
    folder = link_package(Path(tempfile.mkdtemp(prefix="harness-runtime-")))
    try:
        return subprocess.run([str(proxy_python()), "-m", module, *args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, env=runtime_env(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def tool_command(tool: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run mitmproxy's ``tool`` (one of ``MITMPROXY_TOOLS``) with ``args`` under the
    proxy's interpreter, made first if it must be (RuntimeError_ when it cannot). Through its entry function, not
    a script beside the interpreter: a ``HARNESS_PROXY_PYTHON`` need not keep its scripts there."""
    if tool not in MITMPROXY_TOOLS:
        raise ValueError(f"{tool!r} is not one of mitmproxy's programs: {', '.join(MITMPROXY_TOOLS)}")
    python = str(proxy_python())
    code = f"import sys; from mitmproxy.tools.main import {tool}; sys.exit({tool}(sys.argv[1:]))"
    return [python, "-c", code, *args], runtime_env(Path(tempfile.gettempdir()))


def default_venv() -> Path:
    return harness_cache() / f"proxy-py{sys.version_info.major}.{sys.version_info.minor}"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _has_mitmproxy(python: Path) -> bool:
    probe = "import mitmproxy.version as v, pydantic; assert v.VERSION.startswith('11.')"
    try:
        return subprocess.run([str(python), "-c", probe], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60, env=runtime_env(Path(tempfile.gettempdir()))).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _mitmproxy_11_here() -> bool:
    """mitmproxy 11 installed beside the harness (the addon is built and tested against 11)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("mitmproxy").startswith("11.")
    except importlib.metadata.PackageNotFoundError:
        return False


def proxy_python() -> Path:
    """The interpreter to run ``harness.proxy.process`` with (see the module's docstring)."""
    chosen = os.environ.get(PYTHON_ENV)
    if chosen:
        if not _has_mitmproxy(Path(chosen)):
            raise RuntimeError_(f"{PYTHON_ENV}={chosen}: that interpreter cannot import mitmproxy 11 and pydantic; "
                                f"install them there ({' '.join(REQUIREMENTS)}) or unset {PYTHON_ENV}")
        return Path(chosen)
    if _mitmproxy_11_here() and importlib.util.find_spec("pydantic") is not None:
        return Path(sys.executable)
    venv = Path(os.environ.get(VENV_ENV) or default_venv())
    python = _venv_python(venv)
    if python.exists() and (venv / ".complete").exists():
        return python
    return _make_venv(venv)


def _make_venv(venv: Path) -> Path:
    """Make the private venv once, under a lock; ``.complete`` is written last, so a venv half made by a
    killed run is made again."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another harness process may be making it right now
        if (venv / ".complete").exists():
            return _venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        notices.say(f"\nretry-harness: making the fault proxy's runtime (mitmproxy 11) in {venv}, once (10-30 s); "
                    f"it is kept and reused (set {PYTHON_ENV} to use an interpreter of your own)\n")
        began = time.monotonic()
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
            install = subprocess.run([str(_venv_python(venv)), "-m", "pip", "install", "-q",
                                      "--disable-pip-version-check", *REQUIREMENTS],
                                     capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError_(f"could not make the fault proxy's runtime in {venv}: {exc}; set {PYTHON_ENV} "
                                f"to an interpreter with {' '.join(REQUIREMENTS)}") from None
        if install.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError_(f"pip could not install {' '.join(REQUIREMENTS)} for the fault proxy "
                                f"(exit {install.returncode}):\n{install.stderr[-2000:]}\nset {PYTHON_ENV} "
                                f"to an interpreter that has them")
        (venv / ".complete").write_text(" ".join(REQUIREMENTS) + "\n")
        notices.say(f"retry-harness: fault proxy runtime ready in {time.monotonic() - began:.0f} s\n")
        return _venv_python(venv)
