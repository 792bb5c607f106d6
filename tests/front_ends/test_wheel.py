"""The slow install test: the built wheel works where agents live, in a fresh virtual environment.

It builds the wheel from a copy of the project's sources (`pip wheel --no-deps`), checks that it holds
every file of the packages (the catalogue, the expected outcomes, the schemas, the wrong agents...),
installs it into a new venv (dependencies from the package index, through pip's cache) and, from an
empty folder, runs the public commands only: `python -m harness scenarios`, `matrix --help`, `run
response_lost` with the default evidence folder, and `pytest --scenario response_lost`. Then it
empties the installed catalogue and checks that the commands say so instead of listing nothing.

Marked `install` (`-m "not install"` leaves it out); it runs in the normal suite, in 20-50 s.
Everything it creates lives in one temp folder, removed at the end, also when the test fails; the only
thing kept is what the harness keeps for any user: the fault proxy's runtime, made on a machine's first
run (the fresh venv has no mitmproxy) in the user's cache, or wherever HARNESS_PROXY_VENV says.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "fake_destinations", "certification")
BUILD_INPUTS = ("pyproject.toml", "README.md", *PACKAGES)  # what setuptools reads to build the wheel
NOT_SHIPPED = ("__pycache__", "*.pyc")
INSTALL_TIMEOUT = 300.0  # a cold pip cache downloads mitmproxy and its dependencies
COMMAND_TIMEOUT = 120.0

pytestmark = pytest.mark.install


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A temp folder for the sources, the wheel, the venv (some 180 MB) and the empty caller's folder;
    removed whatever happens (pytest's tmp_path would keep the venv of the last runs)."""
    root = Path(tempfile.mkdtemp(prefix="retry-harness-wheel-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(argv: list[str], *, cwd: Path, env: Mapping[str, str] | None = None,
        timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run a command in its own process group; on timeout the whole group is killed and the test fails."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(argv)} did not finish within {timeout:g} s\n{out}\n{err}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    command = " ".join(result.args)
    assert result.returncode == 0, f"{command} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def package_files(root: Path) -> set[str]:
    """Every file of the packages under ``root``, as wheel member names."""
    return {path.relative_to(root).as_posix() for package in PACKAGES for path in (root / package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


def user_env(venv: Path, tmp: Path) -> dict[str, str]:
    """The environment of a user whose PATH starts with the venv: nothing of this test run leaks in (no
    PYTHONPATH to the sources, no pytest or xdist variables, no harness settings but the user's choice of
    the fault proxy's runtime, which the harness makes once, on first use, and keeps like pip's cache)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYTEST_", "VIRTUAL_ENV", "HARNESS_", "COV_CORE"))
           or k.startswith("HARNESS_PROXY_")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), TMPDIR=str(tmp))
    return env


def wait_empty(folder: Path, deadline: float = 10.0) -> None:
    end = time.monotonic() + deadline
    while any(folder.iterdir()):
        if time.monotonic() > end:
            pytest.fail(f"left behind in the temp folder: {sorted(p.name for p in folder.iterdir())}")
        time.sleep(0.05)


def fresh_venv(workspace: Path) -> tuple[Path, Path, Path, str]:
    """A new venv in the workspace, an empty caller's folder and a TMPDIR to watch: (venv, caller, tmp, python)."""
    venv, caller, tmp = workspace / "venv", workspace / "empty", workspace / "tmp"
    caller.mkdir()
    tmp.mkdir()
    ok(run([sys.executable, "-m", "venv", str(venv)], cwd=workspace))
    return venv, caller, tmp, str(venv / "bin" / "python")


def build_wheel(workspace: Path) -> Path:
    """The project's wheel, built from a copy: setuptools writes build/ and *.egg-info next to the
    sources it builds, and the checkout must stay clean."""
    source = workspace / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns(*NOT_SHIPPED))
        else:
            shutil.copy2(REPO / name, source / name)
    wheels = workspace / "wheels"
    # an absolute path: a bare folder name would be looked up as a project on the package index
    ok(run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(source)],
           cwd=workspace, timeout=INSTALL_TIMEOUT))
    [wheel] = wheels.glob("retry_harness-*.whl")
    return wheel


def test_the_wheel_installs_into_a_fresh_venv_and_its_public_commands_work(workspace: Path) -> None:
    began = time.monotonic()
    wheel = build_wheel(workspace)

    # -- the wheel holds every file of the packages: code, catalogue, expected outcomes, schemas, agents
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        [metadata] = [n for n in members if n.endswith(".dist-info/METADATA")]
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    expected = package_files(REPO)
    for wanted in ("harness/scenarios/response_lost.yaml", "harness/expected_outcomes.yaml",
                   "harness/schemas/scenario.schema.json", "harness/schemas/audit-event.schema.json",
                   "harness/agents/wrong/new_key_per_attempt.py", "harness/agent_supervisor.py", "harness/py.typed"):
        assert wanted in expected, f"{wanted} is no longer in the sources: update this test"
    assert sorted(expected - members) == [], "files of the packages missing from the wheel"
    assert len([m for m in members if m.startswith("harness/scenarios/") and m.endswith(".yaml")]) >= 19
    for optional in ("httpx", "jsonschema"):  # an extra's (test, instrument), never the runtime's
        lines = [line for line in requires if line.split()[1].lower().startswith(optional)]
        assert lines and all("; extra == " in line for line in lines), requires
    assert any(m.startswith("harness/apis/") and m.endswith(".yaml") for m in members), "the API profiles ship"

    # -- a fresh venv with the wheel and its dependencies
    venv, caller, tmp, python = fresh_venv(workspace)
    ok(run([python, "-m", "pip", "install", "--quiet", str(wheel)], cwd=workspace, timeout=INSTALL_TIMEOUT))
    installed = time.monotonic()
    env = user_env(venv, tmp)

    where = ok(run([python, "-c", "import harness.resources as r; print(r.catalogue_dir())"], cwd=caller, env=env))
    catalogue = Path(where.stdout.strip())
    assert catalogue.is_relative_to(venv), f"harness imported from {catalogue}, not from the venv"

    # -- the public commands, from an empty folder
    listed = ok(run([python, "-m", "harness", "scenarios"], cwd=caller, env=env))
    assert "response_lost " in listed.stdout, listed.stdout
    ok(run([python, "-m", "harness", "matrix", "--help"], cwd=caller, env=env))
    ran = ok(run([python, "-m", "harness", "run", "response_lost"], cwd=caller, env=env))
    assert "scenario response_lost with agent 'python -m harness.agents.reference': PASS" in ran.stdout, ran.stdout
    [evidence] = (caller / "evidence").iterdir()  # the default evidence folder: ./evidence
    assert (evidence / "verdict.json").is_file()
    tested = ok(run([str(venv / "bin" / "pytest"), "--scenario", "response_lost", "-p", "no:cacheprovider"],
                    cwd=caller, env=env))
    assert "1 passed" in tested.stdout, tested.stdout
    assert len(list((caller / "evidence").iterdir())) == 2
    wait_empty(tmp)  # the destination processes removed their pool folders

    # -- an installation without its catalogue says so, and fails
    for path in catalogue.glob("*.yaml"):
        path.unlink()
    empty = run([python, "-m", "harness", "scenarios"], cwd=caller, env=env)
    assert empty.returncode == 2 and empty.stdout == "", empty
    assert f"the bundled scenario catalogue {catalogue} holds no scenario file (*.yaml)" in empty.stderr
    matrix = run([python, "-m", "harness", "matrix"], cwd=caller, env=env)
    assert matrix.returncode == 2 and "Known scenarios: none" in matrix.stderr, matrix
    for result in (empty, matrix):
        assert "Traceback" not in result.stderr, result.stderr
    print(f"wheel test: build and install {installed - began:.1f} s, commands {time.monotonic() - installed:.1f} s")


# langgraph, mcp, openai-agents and pydantic-ai: their httpcore needs h11>=0.16, which mitmproxy 11 forbids
FRAMEWORKS = ("langgraph", "langchain-core", "mcp", "openai-agents", "pydantic-ai-slim", "smolagents", "agno")
FRAMEWORK_IMPORTS = ("langgraph.graph", "langchain_core", "mcp", "agents", "pydantic_ai", "smolagents", "agno.agent")


def test_one_venv_holds_the_harness_and_the_agent_frameworks_and_runs_a_scenario(workspace: Path) -> None:
    """The harness installs where agents live: one fresh venv holds the wheel and the four frameworks,
    without mitmproxy; a scenario runs there, its fault proxy in the private runtime the harness makes
    on first use (here from scratch, in the workspace)."""
    wheel = build_wheel(workspace)
    venv, caller, tmp, python = fresh_venv(workspace)
    ok(run([python, "-m", "pip", "install", "--quiet", str(wheel), *FRAMEWORKS], cwd=workspace,
           timeout=INSTALL_TIMEOUT))
    env = {**user_env(venv, tmp), "HARNESS_PROXY_VENV": str(workspace / "proxy-runtime")}

    found = ok(run([python, "-c", "import importlib.metadata as m, importlib.util as u; "
                    "print(m.version('h11'), u.find_spec('mitmproxy') is not None)"], cwd=caller, env=env))
    h11, has_mitmproxy = found.stdout.split()
    assert has_mitmproxy == "False", "mitmproxy must not be installed into the agent's environment"
    assert tuple(int(x) for x in h11.split(".")[:2]) >= (0, 16), h11
    ok(run([python, "-c", "; ".join(f"import {name}" for name in FRAMEWORK_IMPORTS)], cwd=caller, env=env))

    ran = ok(run([python, "-m", "harness", "run", "response_lost"], cwd=caller, env=env, timeout=INSTALL_TIMEOUT))
    assert "scenario response_lost with agent 'python -m harness.agents.reference': PASS" in ran.stdout, ran.stdout
    assert "making the fault proxy's runtime" in ran.stderr  # made for this venv, not found elsewhere
    assert (workspace / "proxy-runtime" / ".complete").exists()
    # the main job's first run on a machine says so too, past pytest's capture: no 20 s of silence
    env["HARNESS_PROXY_VENV"] = str(workspace / "proxy-runtime-pytest")
    ran = ok(run([python, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost"], cwd=caller,
                 env=env, timeout=INSTALL_TIMEOUT))
    assert "1 passed" in ran.stdout, ran.stdout
    assert "making the fault proxy's runtime" in ran.stderr and "fault proxy runtime ready in" in ran.stderr, ran.stderr
    wait_empty(tmp)


def test_the_harness_installs_beside_the_newest_mcp_sdk_and_its_mcp_scenarios_pass(workspace: Path) -> None:
    """Agents on the current MCP SDK (2.x) are not locked out: the wheel resolves beside the newest mcp 2 release,
    and there the fake MCP servers and the reference agent's client (each on the SDK's 2.x API) pass every MCP
    scenario of the catalogue. A new release that breaks either fails here, not for a user."""
    wheel = build_wheel(workspace)
    venv, caller, tmp, python = fresh_venv(workspace)
    ok(run([python, "-m", "pip", "install", "--quiet", str(wheel), "mcp>=2.3"], cwd=workspace, timeout=INSTALL_TIMEOUT))
    env = user_env(venv, tmp)
    found = ok(run([python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"], cwd=caller, env=env))
    assert int(found.stdout.split(".")[0]) >= 2, found.stdout

    ran = run([python, "-m", "harness", "run", "mcp_*"], cwd=caller, env=env, timeout=INSTALL_TIMEOUT)
    said = [line for line in ran.stdout.splitlines() if line.startswith("scenario mcp_")]
    assert ran.returncode == 0 and len(said) >= 4 and all(line.endswith(": PASS") for line in said), \
        ran.stdout[-4000:] + ran.stderr[-2000:]
    wait_empty(tmp)


def test_certify_sdk_runs_from_the_wheel_in_an_environment_it_makes(workspace: Path) -> None:
    """A team certifies the SDK release it runs from the installed wheel, not a checkout: `python -m certification
    --sdk NAME==VERSION` from an empty folder makes that release's environment (uv, the certify extra) and runs
    its connectors through the harness."""
    wheel = build_wheel(workspace)
    venv, caller, tmp, python = fresh_venv(workspace)
    ok(run([python, "-m", "pip", "install", "--quiet", f"{wheel}[certify]"], cwd=workspace, timeout=INSTALL_TIMEOUT))
    env = {**user_env(venv, tmp), "HARNESS_SDK_ENVS": str(workspace / "sdk-envs")}
    ran = ok(run([python, "-m", "certification", "--sdk", "backoff==2.2.1", "--evidence-dir", "evidence"],
                 cwd=caller, env=env, timeout=INSTALL_TIMEOUT))
    rows = [line for line in ran.stdout.splitlines() if line.startswith("| `backoff_post")]
    assert len(rows) == 2 and all("(backoff 2.2.1)" in row for row in rows), ran.stdout
    assert "8 as published, 0 differ" in ran.stdout, ran.stdout
    assert list((workspace / "sdk-envs").glob("py3.*-backoff-2.2.1/.complete.json")), "the environment was made"
    wait_empty(tmp)
