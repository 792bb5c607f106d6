"""`python -m harness matrix --agent CMD`: a team certifies its own agents beside the bundled ones, with
the black-box facts of every cell, in text, JSON and a Markdown file it can publish."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.errors import AgentError
from harness.matrix import AgentSpec, agent_spec, agent_specs, load_expectations
from harness.report import markdown_cell, render_matrix, render_matrix_markdown
from harness.results.matrix import REFERENCE, Cell, Matrix

EXPECTED = load_expectations()
PLAIN = "python -m tests.common.plain_agents."
SCENARIOS = Path(__file__).parents[1] / "engine" / "scenarios"
MARKDOWN = MarkdownIt("commonmark").enable("table").enable("strikethrough")  # GitHub's tables, as rich's parser


def harness(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout)


def table_cells(markdown: str) -> list[list[str]]:
    """Every table row of a Markdown text as the rendered text of its cells (GitHub-flavoured tables)."""
    rows: list[list[str]] = []
    tokens = MARKDOWN.parse(markdown)
    for index, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("td_open", "th_open"):
            rows[-1].append(_text(tokens[index + 1]))
    return rows


def _text(inline: object) -> str:
    out = ""
    for child in getattr(inline, "children", None) or []:
        if child.type in ("text", "code_inline"):
            out += child.content
        elif child.type == "softbreak":
            out += "\n"
        else:  # markup where there should be none: make it show
            out += f"<{child.type}>"
    return out


# -- which agent a value names -----------------------------------------------------------------------

def test_a_bundled_name_a_labelled_command_and_a_bare_command():
    assert agent_spec("reference", EXPECTED) == AgentSpec("reference", EXPECTED.reference, True)
    assert agent_spec("idle", EXPECTED) == AgentSpec("idle", "python -m harness.agents.wrong.idle", True)
    assert agent_spec("mine=python my_agent.py --fast", EXPECTED) == AgentSpec("mine", "python my_agent.py --fast",
                                                                               False)
    assert agent_spec("python my_agent.py x=1", EXPECTED) == AgentSpec("python my_agent.py x=1",
                                                                       "python my_agent.py x=1", False)
    assert agent_spec("./agent.sh", EXPECTED).bundled is False  # a path: run as given


@pytest.mark.parametrize("value, said", [
    ("idel", "--agent 'idel' is neither a bundled agent (did you mean 'idle'?) nor a program on PATH"),
    ("mine=", "--agent 'mine=' is neither a bundled agent nor a program on PATH"),
    ("mine=  ", "--agent 'mine=  ': the agent command is empty"),
    ("idle=python x.py", "the label 'idle' is a bundled agent's name; choose another"),
    ("x=python 'unclosed", "the agent command is not valid shell words"),
])
def test_a_value_that_names_no_agent_is_an_error_naming_the_choices(value, said):
    with pytest.raises(AgentError) as caught:
        agent_spec(value, EXPECTED)
    assert said in str(caught.value)


def test_one_label_names_one_agent():
    assert len(agent_specs(["a=python x.py", "a=python x.py", "reference"], EXPECTED)) == 2
    with pytest.raises(AgentError, match="the label 'a' names two agents"):
        agent_specs(["a=python x.py", "a=python y.py"], EXPECTED)


# -- what a cell says ----------------------------------------------------------------------------------

def test_a_team_cell_is_pass_or_fail_with_its_codes_and_its_facts():
    facts = {"effects": 2, "attempts": 2, "key_behaviour": "no key"}
    failed = Cell("mine", "s1", False, ["H040", "H041"], "e", command="python mine.py", bundled=False, facts=facts)
    passed = Cell("mine", "s2", True, [], "", command="python mine.py", bundled=False)
    caught = Cell("idle", "s1", False, ["H021"], "e", ["H021"])
    assert (failed.verdict, failed.outcome, failed.fact("key_behaviour")) == ("fail", "FAIL H040 H041", "no key")
    assert (passed.verdict, passed.outcome, passed.fact("effects")) == ("ok", "PASS", "-")
    assert caught.outcome == "FAIL H021 (caught)"
    assert Cell(REFERENCE, "s1", False, ["H015"], "e").outcome == "FAIL H015 (false-alarm)"
    matrix = Matrix([failed, caught, passed])  # scenario-major, as the matrix runs them
    assert not matrix.ok and matrix.uncertified() == [failed]
    text = render_matrix(matrix)
    assert "your agents: 1/2 cells passed" in text
    assert "failed: mine on s1: found H040, H041 (e)" in text
    assert text.endswith("agent  scenario  verdict             effects  attempts  key behaviour\n"
                         "mine   s1        FAIL H040 H041      2        2         no key\n"
                         "mine   s2        PASS                -        -         -\n"
                         "idle   s1        FAIL H021 (caught)  -        -         -")  # agent by agent
    assert Matrix([passed, caught]).ok


def test_the_markdown_table_renders_as_the_cells_say_pipes_and_backslashes_included():
    odd = "python -c 'print(1 | 2)' C:\\agents\\*mine*"
    matrix = Matrix([Cell(odd, "s_1", False, ["H040"], "e", command=odd, bundled=False,
                          facts={"effects": 2, "attempts": 3, "key_behaviour": "key changed"})])
    rows = table_cells(render_matrix_markdown(matrix))
    assert rows == [["agent", "scenario", "verdict", "effects", "attempts", "key behaviour"],
                    [odd, "s_1", "FAIL H040", "2", "3", "key changed"],
                    ["agent", "command"], [odd, odd]]


PRINTABLE = st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp", "Zs"), include_characters=" ")
MARKUP = st.sampled_from(list("\\|`*_[]<>&~!#():-. a1"))  # what Markdown reads as markup, and its neighbours


@given(st.text(st.one_of(PRINTABLE, MARKUP), max_size=40))
def test_any_text_in_a_markdown_cell_renders_as_itself(text):
    [_, [cell]] = table_cells(f"| h |\n|---|\n| {markdown_cell(text)} |\n")
    assert cell == text.strip()


def test_line_breaks_in_a_cell_become_spaces():
    broken = "one\n two\r\nthree"
    [_, [cell]] = table_cells(f"| h |\n|---|\n| {markdown_cell(broken)} |\n")
    assert cell == "one two three"


# -- end to end --------------------------------------------------------------------------------------

def test_a_teams_agents_are_certified_beside_the_reference_with_their_facts(tmp_path: Path) -> None:
    """Real commands through the real engine: a labelled agent that keeps one key passes; a bare command that
    retries blindly (its command holds a pipe, which the Markdown must escape) fails on the duplicate."""
    blind = PLAIN + "blind_retry --note 'a|b'"
    markdown, data_file = tmp_path / "matrix.md", tmp_path / "matrix.json"
    out = harness("matrix", "--agent", f"keyed={PLAIN}one_key", "--agent", blind, "--agent", "reference",
                  "--scenario", str(SCENARIOS / "black_box_response_lost.yaml"),
                  "--scenario", str(SCENARIOS / "black_box_e*.yaml"), "--jobs", "1", "--format", "json",
                  "--evidence-dir", str(tmp_path / "evidence"), "--markdown", str(markdown), "--json", str(data_file))
    assert out.returncode == 1, out.stdout + out.stderr  # the blind agent is not certified
    data = json.loads(out.stdout)
    assert json.loads(data_file.read_text()) == data
    assert data["agents"] == [{"label": "keyed", "command": PLAIN + "one_key", "bundled": False},
                              {"label": blind, "command": blind, "bundled": False},
                              {"label": "reference", "command": EXPECTED.reference, "bundled": True}]
    cells = {(c["agent"], c["scenario"]): c for c in data["cells"]}
    keyed = cells[("keyed", "black_box_response_lost")]
    assert (keyed["outcome"], keyed["mode"], keyed["facts"]["effects"], keyed["facts"]["attempts"],
            keyed["facts"]["key_behaviour"]) == ("PASS", "black_box", 1, 2, "one key on 2 attempts")
    blinded = cells[(blind, "black_box_response_lost")]
    assert blinded["outcome"] == "FAIL H040 H041 X001" and blinded["facts"]["key_behaviour"] == "no key"
    assert cells[("keyed", "black_box_email_lost")]["outcome"] == "FAIL H040 H041 X001"  # no dedup: a key is no help
    assert cells[("reference", "black_box_email_lost")]["outcome"] == "PASS"
    rows = table_cells(markdown.read_text())
    assert rows[0] == ["agent", "scenario", "verdict", "effects", "attempts", "key behaviour"]
    assert [blind, "black_box_response_lost", "FAIL H040 H041 X001", "2", "2", "no key"] in rows
    assert ["keyed", "black_box_response_lost", "PASS", "1", "2", "one key on 2 attempts"] in rows
    assert [blind, blind] in rows  # the agents' commands, for whoever reads the published table
    assert "a\\|b" in markdown.read_text()


def test_the_text_table_and_exit_0_when_every_own_cell_passes(tmp_path: Path) -> None:
    out = harness("matrix", "--agent", f"keyed={PLAIN}one_key", "--scenario", "response_lost", "--black-box",
                  "--jobs", "1", "--evidence-dir", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "your agents: 1/1 cells passed" in out.stdout
    assert "cells (judged in black-box mode: from the proxy journal and the effect ledger alone):" in out.stdout
    assert "keyed  response_lost  PASS     1        2         one key on 2 attempts" in out.stdout


@pytest.mark.parametrize("args, said", [
    (["--agent", "idel"], "did you mean 'idle'?"),
    (["--agent", "a=python x.py", "--agent", "a=python y.py"], "the label 'a' names two agents"),
    (["--scenario", "no/such/*.yaml"], "no scenario file matches 'no/such/*.yaml'"),
    (["--markdown", "/no/such/folder/m.md"], "cannot write /no/such/folder/m.md: folder /no/such/folder does not"),
])
def test_bad_matrix_input_is_exit_2_before_anything_runs(tmp_path: Path, args: list[str], said: str) -> None:
    out = harness("matrix", *args, "--scenario", "response_lost", "--evidence-dir", str(tmp_path), timeout=60)
    assert out.returncode == 2 and said in out.stderr, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and not any(tmp_path.iterdir())
