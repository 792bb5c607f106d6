"""`--agent` in both front ends: an empty value is a usage error, never the default agent.

`--agent "$AGENT"` with an unset variable gives `--agent ""`; running the reference agent instead
would pass the run without testing the agent meant. Real subprocesses, as CI would start them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EMPTY_VALUES = ["", "   ", "\t\n"]


@pytest.mark.parametrize("value", EMPTY_VALUES, ids=["empty", "spaces", "tab-newline"])
def test_cli_run_with_an_empty_agent_is_exit_2_naming_the_option(tmp_path: Path, value: str) -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--agent", value],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"python -m harness run: error: argument --agent: {value!r} is empty; give a command such as " \
           "'python -m harness.agents.reference'" in out.stderr
    assert "leave --agent out to use the scenario's agent, else the reference agent" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert not (tmp_path / "evidence").exists(), "nothing ran"


@pytest.mark.parametrize("value", EMPTY_VALUES, ids=["empty", "spaces", "tab-newline"])
def test_pytest_with_an_empty_agent_is_a_usage_error_naming_the_option(run_plugin, value: str) -> None:
    result = run_plugin("--scenario", "response_lost", "--agent", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: --agent: {value!r} is empty; give a command such as 'python -m harness.agents.reference'" \
           in result.stderr.str()
    assert "leave --agent out" in result.stderr.str()
    assert not any(result.evidence_dir.iterdir()), "nothing ran"


def test_an_agent_that_is_given_still_runs(run_plugin) -> None:
    """The check rejects only what is no command: a real one, with spaces around it, runs and passes."""
    result = run_plugin("--scenario", "response_lost", "--agent", "  python -m harness.agents.reference ")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "spaces"])
def test_an_empty_agent_in_the_ini_file_is_a_usage_error_naming_the_file(pytester: pytest.Pytester,
                                                                          value: str) -> None:
    ini = pytester.makeini(f"[pytest]\nretry_harness_agent = {value}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scenario", "response_lost",
                                           "--evidence-dir", str(pytester.path / "ev"), timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: retry_harness_agent in {ini}: " in result.stderr.str()
    assert "is empty" in result.stderr.str()
    assert not (pytester.path / "ev").exists(), "nothing ran"


def test_one_function_chooses_the_agent_in_every_front_end_and_the_engine() -> None:
    """`chosen_agent`: a container agent as given; an image runs the command in it; the command; the scenario's;
    the plugin's ini option; the default (the engine's: the reference agent)."""
    from harness.errors import ScenarioError
    from harness.scenario import ContainerAgent, chosen_agent

    given = ContainerAgent(image="team/agent:1")
    assert chosen_agent(given, "other/image:2", "python declared.py") is given
    boxed = chosen_agent("python mine.py", "team/agent:dev", "python declared.py")
    assert isinstance(boxed, ContainerAgent) and boxed.image == "team/agent:dev"
    assert boxed.command == ["python", "mine.py"]
    image_only = chosen_agent(None, "team/agent:dev", "python declared.py")
    assert isinstance(image_only, ContainerAgent) and image_only.command is None
    assert chosen_agent("python mine.py", None, "python declared.py", configured="python ini.py") == "python mine.py"
    assert chosen_agent(None, None, "python declared.py", configured="python ini.py") == "python declared.py"
    assert chosen_agent(None, None, None, configured="python ini.py", default="python ref.py") == "python ini.py"
    assert chosen_agent(None, None, None, default="python ref.py") == "python ref.py"
    assert chosen_agent(None, None, None) is None
    with pytest.raises(ScenarioError, match="--harness-agent-image 'Not An Image'"):
        chosen_agent(None, "Not An Image", None, option="--harness-agent-image")
