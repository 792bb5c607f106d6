"""Exploration through the real parts: the engine's destinations and fault proxy, agents as processes,
the CLI and the pytest plugin as a user calls them. A wrong agent is found and its reproducer fails it
every time while the reference agent passes it; the reference agent survives explored schedules; Ctrl-C
leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.explore import explore
from harness.matrix import load_expectations
from harness.resources import catalogue_dir
from harness.scenario import load

WRONG = "python -m harness.agents.wrong.{}"
TIMEOUT = 600


def harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, env=env)


def test_a_wrong_agent_is_found_and_its_reproducer_fails_it_every_time(tmp_path: Path) -> None:
    agent = WRONG.format("timeout_as_failed")
    found = tmp_path / "found.yaml"
    out = harness("explore", "response_lost", "--agent", agent, "--examples", "40", "--seed", "1",
                  "--reproducer", str(found), "--no-database", "--format", "json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads(out.stdout)
    shrunk = report["found"][0]
    assert shrunk["confirmed"] and shrunk["reproducer"] == str(found.resolve())
    flaw = {code for codes in load_expectations().caught_by["timeout_as_failed"].values() for code in codes}
    assert flaw & set(shrunk["codes"])  # a rule that names its flaw (expected_outcomes.yaml)
    assert len(shrunk["schedule"]["faults"]) <= 2  # shrunk: one lost answer is all it takes
    scenario = load(found)
    assert "Found by exploring response_lost" in scenario.description

    again = harness("run", str(found), "--agent", agent, "--format", "json", cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    reference = harness("run", str(found), cwd=tmp_path)
    assert reference.returncode == 0, reference.stdout + reference.stderr


def test_pytest_explore_fails_with_the_shrunk_schedule_and_the_reproducer(run_plugin, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the short summary's line keeps its message whole
    result = run_plugin("--scenario", "response_lost", "--explore", "40", "--explore-seed", "1",
                        "--agent", WRONG.format("timeout_as_failed"), "-rf", timeout=TIMEOUT)
    assert result.ret == 1, result.stdout.str()
    text = result.stdout.str()
    assert "explore[response_lost]" in text
    reproducer = result.evidence_dir / "explore" / "response_lost.found.yaml"
    assert reproducer.is_file() and str(reproducer) in text
    summary = [line for line in text.splitlines() if line.startswith("FAILED")]
    flaw = {code for codes in load_expectations().caught_by["timeout_as_failed"].values() for code in codes}
    assert summary and "reproducer" in summary[0] and any(code in summary[0] for code in flaw)

    rerun = run_plugin("--scenario", str(reproducer), "--agent", WRONG.format("timeout_as_failed"),
                       timeout=TIMEOUT)
    assert rerun.ret == 1, rerun.stdout.str()
    assert run_plugin("--scenario", str(reproducer), timeout=TIMEOUT).ret == 0


def test_the_reference_agent_survives_explored_schedules(tmp_path: Path) -> None:
    base = load(catalogue_dir() / "response_lost.yaml")
    state = explore(base, agent="python -m harness.agents.reference", evidence_root=tmp_path, examples=20,
                    seed=5, database=None)
    problems = [(f.codes, f.schedule.summary(), str(f.confirmation_evidence)) for f in state.found] + \
        [(f.first_codes, f.schedule.summary(), str(f.evidence_dir)) for f in state.flaky] + \
        [(r.codes, r.schedule.summary(), str(r.evidence_dir)) for r in state.also_failed]
    assert not problems
    assert state.runs >= 10 and not state.incomplete


def test_ctrl_c_stops_the_exploration_and_leaves_nothing_behind(tmp_path: Path) -> None:
    from tests.front_ends.test_harness_killed import processes_of

    caller = tmp_path / "caller"
    caller.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "explore", "crash_after_dispatch", "--examples", "50",
                             "--seed", "3", "--no-database", "-q"], cwd=caller, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a suite started in the background (`cmd &`) ignores SIGINT,
                            # and a Python started with it ignored never turns it into KeyboardInterrupt
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not list((caller / "evidence").glob("explore-*/runs/*/agent.ndjson")):
            assert proc.poll() is None and time.monotonic() < deadline, "no agent ran"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "stopped by interrupted" in out, out + err
    assert "Traceback" not in err, err
    deadline = time.monotonic() + 30
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_of(tmp_path)
    assert left == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left if Path(f"/proc/{pid}").exists()]


@pytest.mark.parametrize("args, message", [
    (["explore", "no_such_scenario"], "no scenario 'no_such_scenario'"),
    (["explore", "response_*"], "explore starts from one scenario"),
    (["explore", "response_lost", "--examples", "0"], "expected a whole number of at least 1"),
    (["explore", "response_lost", "--client-timeout", "-1"], "expected a number of seconds above 0"),
    (["explore", "response_lost", "--agent", ""], "--agent"),
])
def test_bad_input_is_a_usage_error_that_names_it(tmp_path: Path, args: list[str], message: str) -> None:
    out = harness(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr


def test_a_team_uses_the_public_strategies_in_its_own_given_test(pytester: pytest.Pytester) -> None:
    """The docs/explore.md example, as a team's test file, through pytest and the real engine."""
    pytester.makepyfile(test_connector='''
        from hypothesis import given, settings
        from harness.pytest_plugin import assert_scenario_passed
        from harness.resources import catalogue_dir
        from harness.scenario import load
        from harness.strategies import explored_scenarios

        @settings(max_examples=4, deadline=None, database=None)
        @given(scenario=explored_scenarios(load(catalogue_dir() / "response_lost.yaml"), max_faults=1))
        def test_my_connector(harness_engine, scenario):
            assert_scenario_passed(harness_engine.run(scenario, agent="python -m harness.agents.reference"))
    ''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--evidence-dir", str(pytester.path / "ev"),
                                           timeout=TIMEOUT)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert len(list((pytester.path / "ev").glob("response_lost-*"))) >= 2  # real runs, one per example


def test_pytest_explore_with_no_schedules_is_a_usage_error(run_plugin) -> None:
    result = run_plugin("--scenario", "response_lost", "--explore", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "at least 1" in result.stderr.str()


def test_pytest_explore_says_how_many_schedules_it_ran(tmp_path: Path) -> None:
    """A passing `--explore N` item says what it explored (how many runs of how many drawn schedules, the seed,
    why it stopped), not only PASSED."""
    import re
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scenario", "response_lost",
                           "--explore", "3", "--explore-seed", "2"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    said = re.search(r"retry-harness: explored response_lost with `python -m harness.agents.reference`: (\d+) "
                     r"run\(s\) of 3 drawn schedule\(s\) in [\d.]+ s .*, seed 2, stopped by examples", done.stderr)
    assert said and 1 <= int(said.group(1)) <= 3, done.stderr  # a schedule drawn twice runs once

