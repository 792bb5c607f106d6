"""An agent in a container (docs/containers.md, "An agent in a container"): the real Docker engine, this tree's
runtime image (``ensure_runtime_image()``), the real fault proxy and destinations, the bundled agents run
inside it. Each run is a container that is killed for a planned crash (and verified gone), stopped past its
time limit, and removed whatever ends the run; its stdout and stderr land in the evidence folder."""

from __future__ import annotations

import _thread
import json
import os
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV, EvidenceLayout
from harness.engine import run_scenario
from harness.errors import AgentError, HarnessError
from harness.matrix import load_expectations
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import ContainerAgent, load

REFERENCE = ["python3", "-m", "harness.agents.reference"]
CATALOGUE = sorted(p.stem for p in catalogue_dir().glob("*.yaml"))
# an agent that goes on writing to its log, and starts a helper outside its process group (setsid) that
# writes too: what escaped a process agent's kill (tests/engine/test_crash_verified.py) cannot escape a
# container's, whose PID namespace dies with its init
TICKER = """
import json, os, subprocess, sys, time
session = sys.argv[1] if len(sys.argv) > 1 else "ses_main"
if session == "ses_main":
    subprocess.Popen([sys.executable, "-c", os.environ["TICKER"], "ses_escaped"], start_new_session=True)
while True:
    with open(os.environ["HARNESS_AUDIT_LOG"], "a") as f:
        f.write(json.dumps({"event": "observation", "session_id": session, "operation_id": "op_1",
                            "ts": time.time()}) + "\\n")
    time.sleep(0.005)
"""


def container(image: str, *command: str, **env: str) -> ContainerAgent:
    return ContainerAgent(image=image, command=list(command) or None, env=env)


def our_agent_containers() -> list[str]:
    from harness.containers import docker_client

    return [row["name"] for row in docker_client.listing(docker_client.OWNER)["containers"] if row["role"] == "agent"]


def gone(name: str) -> bool:
    import docker.errors

    from harness.containers import docker_client

    try:
        docker_client.client().containers.get(name)
    except docker.errors.NotFound:
        return True
    return False


def contract_env(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "agent-state"
    state.mkdir(exist_ok=True)
    return {AUDIT_LOG_ENV: str(tmp_path / "agent.ndjson"), STATE_DIR_ENV: str(state)}


def killed_session_lines_after(log: Path, end: int) -> list[int]:
    """Line numbers past ``end`` bytes written by a session that wrote before ``end``."""
    before: set[str] = set()
    after: list[tuple[int, str]] = []
    at = 0
    for number, raw in enumerate(log.read_bytes().splitlines(keepends=True), 1):
        session = json.loads(raw)["session_id"]
        (before.add(session) if at < end else after.append((number, session)))
        at += len(raw)
    return [number for number, session in after if session in before]


# -- the catalogue --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CATALOGUE)
def test_the_reference_agent_in_a_container_passes_the_catalogue(tmp_path: Path, runtime_image: str,
                                                                name: str) -> None:
    """Every catalogue scenario, HTTP, SSH and MCP alike (the runtime image holds requests, asyncssh and mcp)."""
    result = run_scenario(load(catalogue_dir() / f"{name}.yaml"), agent=container(runtime_image, *REFERENCE),
                          evidence_root=tmp_path)
    assert result.passed, render_result(result)
    assert result.agent == f"image:{runtime_image} python3 -m harness.agents.reference"
    assert all(run.container and gone(run.container) for run in result.agent_runs)
    context = json.loads(EvidenceLayout(result.evidence_dir).context.read_text())
    assert context["agent"]["image"] == runtime_image and context["agent"]["container_command"] == REFERENCE


@pytest.mark.parametrize("agent, scenario", [("new_key_per_attempt", "response_lost"),
                                             ("new_id_after_restart", "crash_after_dispatch")])
def test_a_wrong_agent_in_a_container_fails_on_its_rule(tmp_path: Path, runtime_image: str, agent: str,
                                                        scenario: str) -> None:
    wanted = set(load_expectations().caught_by[agent][scenario])
    result = run_scenario(load(catalogue_dir() / f"{scenario}.yaml"), evidence_root=tmp_path,
                          agent=container(runtime_image, "python3", "-m", f"harness.agents.wrong.{agent}"))
    assert not result.passed and not result.incomplete
    assert wanted <= {f.code for f in result.verdict.findings}, render_result(result)


@pytest.mark.parametrize("mode", ["reverse-https", "forward-https"])
def test_the_https_modes_reach_the_ca_in_the_container(tmp_path: Path, runtime_image: str, mode: str) -> None:
    """The CA's folder is mounted read-only at its own path: SSL_CERT_FILE holds inside as it is."""
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["proxy"] = {"mode": mode}
    path = tmp_path / f"response_lost_{mode}.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_scenario(load(path), agent=container(runtime_image, *REFERENCE), evidence_root=tmp_path / "ev")
    assert result.passed, render_result(result)


# -- the planned crash ----------------------------------------------------------------------------

def test_crash_after_dispatch_kills_the_container_and_nothing_of_it_writes_after(tmp_path: Path,
                                                                                runtime_image: str) -> None:
    """The issue's wrapper, in a container: the agent escapes its process group (setsid), and still dies with
    the container. The run is judged (not INCOMPLETE) and passes; no line of the killed session follows the
    kill; the killed container is gone before the restart's."""
    escape = ("import subprocess, sys; sys.exit(subprocess.Popen([sys.executable, '-m', 'harness.agents.reference'], "
              "start_new_session=True).wait())")
    result = run_scenario(load(catalogue_dir() / "crash_after_dispatch.yaml"), evidence_root=tmp_path,
                          agent=container(runtime_image, "python3", "-c", escape))
    assert result.passed and not result.incomplete, render_result(result)
    killed, restarted = result.agent_runs
    assert killed.killed_by_harness and not restarted.killed_by_harness and restarted.exit_status == 0
    assert killed.container != restarted.container and gone(killed.container) and gone(restarted.container)
    log = EvidenceLayout(result.evidence_dir).agent_log
    assert killed_session_lines_after(log, killed.log_bytes_at_end) == []


def test_a_killed_container_writes_nothing_after_the_kill(tmp_path: Path, runtime_image: str) -> None:
    """An agent that never stops writing (and a setsid helper writing too), killed once it has written: the
    runner returns only when the engine says the container is gone, and the log does not grow afterwards."""
    from harness.containers.agent import run_container_agent

    env = contract_env(tmp_path)
    log = Path(env[AUDIT_LOG_ENV])

    def both_writing() -> bool:
        sessions = set()
        for line in log.read_text().splitlines() if log.exists() else []:
            try:
                sessions.add(json.loads(line)["session_id"])
            except ValueError:  # a line being written
                pass
        return sessions == {"ses_main", "ses_escaped"}

    ticker = ContainerAgent(image=runtime_image, command=["python3", "-c", TICKER], env={"TICKER": TICKER})
    run = run_container_agent(ticker, env, timeout=60,
                              stdout=tmp_path / "out", stderr=tmp_path / "err",
                              kill_when=both_writing)
    assert run.killed_by_harness and run.exit_status is None and not run.timed_out, (tmp_path / "err").read_text()
    assert gone(run.container)
    size = log.stat().st_size
    assert run.log_bytes_at_end == size
    time.sleep(0.5)  # 100 ticks of each writer, had anything of it survived
    assert log.stat().st_size == size


# -- nothing left behind --------------------------------------------------------------------------

def test_the_container_is_stopped_and_removed_past_the_time_limit(tmp_path: Path, runtime_image: str) -> None:
    from harness.containers.agent import run_container_agent

    run = run_container_agent(container(runtime_image, "python3", "-c", "import time; time.sleep(300)"),
                              contract_env(tmp_path), timeout=1, stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert run.timed_out and run.exit_status is None and not run.killed_by_harness
    assert gone(run.container) and our_agent_containers() == []


def test_a_scenario_past_its_time_limit_leaves_no_container(tmp_path: Path, runtime_image: str) -> None:
    scenario = load(catalogue_dir() / "response_lost.yaml").model_copy(update={"agent_timeout_seconds": 1.0})
    result = run_scenario(scenario, agent=container(runtime_image, "python3", "-c", "import time; time.sleep(300)"),
                          evidence_root=tmp_path)
    assert not result.passed and result.agent_runs[0].timed_out
    assert any("did not finish within 1 s" in f for f in result.expectation_failures), render_result(result)
    assert our_agent_containers() == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_exception_in_the_harness_mid_run_removes_the_container(tmp_path: Path, runtime_image: str,
                                                                  error: type[BaseException]) -> None:
    """Ctrl-C (KeyboardInterrupt) or a failure of the harness's own while the agent runs: the container goes."""
    from harness.containers.agent import run_container_agent

    def blow_up() -> bool:
        if our_agent_containers():  # once it runs
            raise error("harness failure")
        return False

    with pytest.raises(error):
        run_container_agent(container(runtime_image, "python3", "-c", "import time; time.sleep(300)"),
                            contract_env(tmp_path), timeout=60, stdout=tmp_path / "out", stderr=tmp_path / "err",
                            kill_when=blow_up)
    assert our_agent_containers() == []


def test_ctrl_c_during_a_scenario_removes_the_container_and_keeps_the_evidence(tmp_path: Path,
                                                                            runtime_image: str) -> None:
    """A real Ctrl-C (KeyboardInterrupt in the main thread) while the engine waits on the agent's container."""
    stop = threading.Event()

    def interrupt_once_it_runs() -> None:
        while not stop.is_set():
            if our_agent_containers():
                _thread.interrupt_main()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=interrupt_once_it_runs, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path,
                         agent=container(runtime_image, "python3", "-c", "import time; time.sleep(300)"))
    finally:
        stop.set()
        watcher.join()
    assert our_agent_containers() == []
    [folder] = tmp_path.iterdir()
    context = json.loads(EvidenceLayout(folder).context.read_text())
    # saved whole as far as it went, and marked interrupted: never judged (issue 30)
    assert context["evidence"]["saved"] is True and context["agent"]["image"] == runtime_image
    assert context["evidence"]["complete"] is False and context["evidence"]["interrupted"] == "SIGINT (Ctrl-C)"


def test_a_normal_end_removes_the_container(tmp_path: Path, runtime_image: str) -> None:
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), agent=container(runtime_image, *REFERENCE),
                          evidence_root=tmp_path)
    assert result.passed and result.agent_runs[0].exit_status == 0
    assert our_agent_containers() == [] and gone(result.agent_runs[0].container)


# -- what the agent gets and gives -----------------------------------------------------------------

def test_stdout_and_stderr_land_in_the_evidence_folder(tmp_path: Path, runtime_image: str) -> None:
    say = "echo to-stdout-$HARNESS_STATE_DIR; echo to-stderr >&2; exec python3 -m harness.agents.reference"
    result = run_scenario(load(catalogue_dir() / "crash_after_dispatch.yaml"), evidence_root=tmp_path,
                          agent=container(runtime_image, "sh", "-c", say))
    assert result.passed, render_result(result)
    layout = EvidenceLayout(result.evidence_dir)
    # one line per run: the killed container's output is kept too, and the restart's appended
    assert layout.agent_stdout.read_text().splitlines() == [f"to-stdout-{layout.state_dir}"] * 2
    assert layout.agent_stderr.read_text().splitlines() == ["to-stderr"] * 2


def test_the_environment_is_the_contracts_over_the_agents_own(tmp_path: Path, runtime_image: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's env reaches the container; the contract's names win; the harness's own environment (the
    operator's checkpoint key, anything else) does not reach it; the agent runs as the harness's user. The
    evidence folder's path holds a colon (which a "SRC:DST:MODE" bind could not carry)."""
    from harness.containers.agent import run_container_agent

    monkeypatch.setenv("HARNESS_CHECKPOINT_KEY_FILE", "/operator/key")
    monkeypatch.setenv("SOME_HOST_SETTING", "host")
    tmp_path = tmp_path / "evidence:1"
    tmp_path.mkdir()
    env = contract_env(tmp_path)
    show = ("import json, os; print(json.dumps({**{k: os.environ.get(k) for k in ('TEAM_SETTING', 'HARNESS_AUDIT_LOG', "
            "'HARNESS_CHECKPOINT_KEY_FILE', 'SOME_HOST_SETTING')}, 'ids': [os.getuid(), os.getgid()]}))")
    agent = ContainerAgent(image=runtime_image, command=["python3", "-c", show], env={"TEAM_SETTING": "42"})
    run = run_container_agent(agent, env, timeout=60, stdout=tmp_path / "out", stderr=tmp_path / "err")
    assert run.exit_status == 0, (tmp_path / "err").read_text()
    assert json.loads((tmp_path / "out").read_text()) == {
        "TEAM_SETTING": "42", "HARNESS_AUDIT_LOG": env[AUDIT_LOG_ENV], "HARNESS_CHECKPOINT_KEY_FILE": None,
        "SOME_HOST_SETTING": None, "ids": [os.getuid(), os.getgid()]}


def test_a_scenario_file_declares_its_container_agent(tmp_path: Path, runtime_image: str) -> None:
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["agent"] = {"image": runtime_image, "command": shlex.join(REFERENCE), "env": {"PYTHONUNBUFFERED": 1}}
    path = tmp_path / "response_lost_in_a_container.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_scenario(load(path), evidence_root=tmp_path / "ev")
    assert result.passed, render_result(result)
    assert result.agent.startswith(f"image:{runtime_image} ")
    context = json.loads(EvidenceLayout(result.evidence_dir).context.read_text())
    assert context["agent"]["container_env"] == ["PYTHONUNBUFFERED"]


def test_a_destination_s_agent_env_reaches_the_container(tmp_path: Path, runtime_image: str) -> None:
    """The destinations' agent_env is part of the environment the engine hands every agent, a container too."""
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data["destinations"]["tickets"]["agent_env"] = {"TICKETS_URL": "{url}"}
    show = "import os; print(os.environ['TICKETS_URL'] == os.environ['HARNESS_DESTINATION_TICKETS'])"
    data["agent"] = {"image": runtime_image, "command": ["sh", "-c", f"python3 -c {shlex.quote(show)} && "
                                                         + shlex.join(REFERENCE)]}
    path = tmp_path / "response_lost_agent_env.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_scenario(load(path), evidence_root=tmp_path / "ev")
    assert result.passed, render_result(result)
    assert EvidenceLayout(result.evidence_dir).agent_stdout.read_text().splitlines()[0] == "True"


def test_a_command_the_image_lacks_is_an_agent_that_cannot_start(tmp_path: Path, runtime_image: str) -> None:
    """As a process agent's: the engine's words, a folder judged as an agent that could not start, no container."""
    with pytest.raises(AgentError) as caught:
        run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path,
                     agent=container(runtime_image, "no-such-program"))
    said = str(caught.value)
    assert said.startswith(f"cannot start agent 'no-such-program' in image {runtime_image}: ") and \
        "executable file not found" in said, said
    [folder] = tmp_path.iterdir()
    assert json.loads(EvidenceLayout(folder).verdict_json.read_text())["passed"] is False
    assert our_agent_containers() == []


def test_an_image_the_engine_lacks_is_a_clear_error_and_the_evidence_stays(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as caught:
        run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path,
                     agent=container("retry-harness-test/absent:never", *REFERENCE))
    assert "image retry-harness-test/absent:never is not present" in str(caught.value)
    assert "never pulls" in str(caught.value)
    [folder] = tmp_path.iterdir()
    assert f"evidence so far: {folder}" in str(caught.value) and EvidenceLayout(folder).context.exists()


# -- the front ends --------------------------------------------------------------------------------

def test_the_cli_runs_the_agent_in_the_image(tmp_path: Path, runtime_image: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "crash_after_dispatch", "--agent-image", runtime_image, "--agent", shlex.join(REFERENCE),
                   "--evidence-dir", str(tmp_path), "--format", "json"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert json.loads(out)["passed"] is True


@pytest.fixture(scope="module")
def team_image(runtime_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A team's image whose own command is its agent (here the reference agent), built FROM our runtime."""
    from harness.containers.images import build

    context = tmp_path_factory.mktemp("team-image")
    (context / "Dockerfile").write_text(f"FROM {runtime_image}\nCMD {json.dumps(REFERENCE)}\n")
    # kept, as the images are (the cache): its tag is the runtime's, and a worker beside this one builds and uses the
    # same tag, so a removal here (force) took the image from under a container that other worker was starting
    yield build(context, f"retry-harness-test/team-agent:{runtime_image.rsplit(':', 1)[1]}")


def test_the_cli_without_a_command_runs_the_images_own(tmp_path: Path, team_image: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "crash_after_dispatch", "--agent-image", team_image, "--evidence-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"with agent 'image:{team_image}': PASS" in out


def test_the_pytest_plugin_takes_agent_image(pytester: pytest.Pytester, runtime_image: str) -> None:
    result = pytester.runpytest_subprocess("--scenario", "response_lost", "--agent-image", runtime_image,
                                           "--agent", shlex.join(REFERENCE), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_matrix_runs_every_agent_in_the_image(tmp_path: Path, runtime_image: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["matrix", "--agent-image", runtime_image, "--agent", "reference", "--agent",
                   "new_key_per_attempt", "--scenario", "response_lost", "--evidence-dir", str(tmp_path),
                   "--jobs", "1", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0, data
    cells = {c["agent"]: c for c in data["cells"]}
    assert cells["reference"]["verdict"] == "ok" and cells["new_key_per_attempt"]["verdict"] == "caught"
    assert all(a["command"].startswith(f"image:{runtime_image} python3 -m harness.agents.") for a in data["agents"])


def test_the_harness_side_in_its_image_starts_the_agents_image(tmp_path: Path, harness_image: str,
                                                               team_image: str) -> None:
    """docker/compose.yaml's command as it is: the harness image (host network, the engine's socket, the
    evidence folder at its own path) runs a scenario with `--agent-image` a team's image, whose own command is
    the agent; the agent's container is started by the harness in its container, and removed by it."""
    from harness.containers import docker_client

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    harness = docker_client.start(harness_image, role="harness", run="test_agent_container", network_mode="host",
                           volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"},
                                    str(evidence): {"bind": str(evidence), "mode": "rw"}},
                           working_dir=str(evidence),
                           command=["run", "crash_after_dispatch", "--evidence-dir", str(evidence), "--agent-image",
                                    team_image, "--format", "json"])
    try:
        status = harness.wait(timeout=600)["StatusCode"]
        output, errors = harness.logs(stderr=False).decode(), harness.logs(stdout=False).decode()
    finally:
        docker_client.remove(harness)
    assert status == 0, output + errors
    assert json.loads(output)["passed"] is True
    [folder] = evidence.iterdir()
    runs = json.loads(EvidenceLayout(folder).context.read_text())["agent"]["runs"]
    assert [r["killed_by_harness"] for r in runs] == [True, False] and all(gone(r["container"]) for r in runs)
    leftovers = [c.name for c in docker_client.client().containers.list(
        all=True, filters={"label": [f"{docker_client.RUN_LABEL}={folder.name}"]})]
    assert leftovers == []
