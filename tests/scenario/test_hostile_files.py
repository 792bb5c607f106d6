"""Hostile scenario files and agent commands: `run` refuses them with exit 2 and one `error:` line
naming the file and line, before any destination, proxy or agent starts (issue 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent_process import argv_for
from harness.cli import main
from harness.errors import AgentError

ERRORS = Path(__file__).parent / "errors"

# the t1_run_* reproducers of issue 10, kept as example files beside their expected messages
RUN_REPRODUCERS = ["fault_status_informational", "name_too_long", "agent_nul", "agent_unclosed_escape",
                   "params_alias_bomb", "params_lone_surrogate"]


@pytest.mark.parametrize("name", RUN_REPRODUCERS)
def test_run_refuses_the_file_with_exit_2_and_its_message(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = ERRORS / f"{name}.yaml"
    assert main(["run", str(bad), "--evidence-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.replace(str(bad), "FILE") == "error: " + (ERRORS / f"{name}.txt").read_text()
    assert list(tmp_path.iterdir()) == []  # nothing ran


@pytest.mark.parametrize(("command", "why"), [
    ("\\", "not valid shell words (No escaped character)"),
    ("python -m 'harness.agents.reference", "not valid shell words (No closing quotation)"),
    ("python\0 -m x", "holds a NUL character"),
    ("   ", "the agent command '   ' is empty; give a command such as"),
])
def test_an_agent_command_that_is_not_an_argv_is_an_agent_error(command: str, why: str) -> None:
    with pytest.raises(AgentError, match=why.replace("(", r"\(").replace(")", r"\)")):
        argv_for(command)


def test_a_quoted_agent_command_still_splits_as_a_shell_would() -> None:
    assert argv_for("mypkg --name 'a b' c\\ d")[1:] == ["--name", "a b", "c d"]


def test_anchors_aliases_and_merge_keys_within_the_limits_still_load(tmp_path: Path) -> None:
    from harness.scenario import load

    path = tmp_path / "s.yaml"
    path.write_text("""\
name: shared
description: two intents share a payload through an anchor and a merge key
destinations:
  tickets: {service: tickets}
intents:
  - {intent_id: t1, kind: create_ticket, destination: tickets, params: &base {title: x, project: P}}
  - {intent_id: t2, kind: create_ticket, destination: tickets, params: {<<: *base, title: y}}
""")
    first, second = load(path).intents
    assert first.params == {"title": "x", "project": "P"}
    assert second.params == {"title": "y", "project": "P"}


def test_aliases_that_nest_deeper_than_the_limit_name_the_alias(tmp_path: Path) -> None:
    from harness.errors import ScenarioError
    from harness.scenario import load
    from harness.yaml_files import MAX_DEPTH

    half = MAX_DEPTH // 2 + 2
    path = tmp_path / "s.yaml"
    path.write_text(f"a: &a {'[' * half}1{']' * half}\nb: &b {'[' * half}*a{']' * half}\n")
    deeper = rf"s.yaml:2: b(\[0\])+\.*: alias \*a nests the document deeper than {MAX_DEPTH} levels"
    with pytest.raises(ScenarioError, match=deeper):
        load(path)
