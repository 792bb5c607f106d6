"""harness.intent_runner: a team's command run once per intent, through the real engine, fault proxy and
destinations (the argv each run saw, a planned crash and the restart, the exit status), and its template
grammar alone (``fill_words``, ``check_template``)."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.contract import INTENTS_ENV, STATE_DIR_ENV
from harness.engine import run_scenario
from harness.intent_runner import STATE_FILE, check_template, fill_words, runner_command
from harness.report import render_result
from harness.results import ScenarioResult
from harness.scenario import load

# a team's tool: one ticket per call, its address from TICKETS_URL, its key from --key; prints the argv it got
# (flushed: a planned crash kills it mid-call) and exits 3 for the priority --fail-priority names (as a team's tool
# exits non-zero when it gives up)
TEAM_TOOL = """
import argparse, json, os, sys, urllib.request

print(json.dumps(sys.argv[1:]), flush=True)
parser = argparse.ArgumentParser()
parser.add_argument("action")
parser.add_argument("--title")
parser.add_argument("--project")
parser.add_argument("--priority", type=int)
parser.add_argument("--key")
parser.add_argument("--fail-priority", type=int)
args = parser.parse_args()
body = {"title": args.title, "project": args.project, "priority": args.priority}
request = urllib.request.Request(os.environ["TICKETS_URL"] + "/tickets", method="POST", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Idempotency-Key": args.key})
with urllib.request.urlopen(request, timeout=10) as answer:
    answer.read()
sys.exit(3 if args.priority == args.fail_priority else 0)
"""
TEMPLATE = ["create", "--title", "{params.title}", "--project", "{params.project}", "--priority",
            "{params.priority}", "--key", "team-{intent_id}"]
INTENTS = [
    {"intent_id": "printer-on-fire", "kind": "create_ticket", "destination": "tickets",
     "params": {"title": "Printer on fire", "project": "OPS", "priority": 1}},
    {"intent_id": "rotate-keys", "kind": "create_ticket", "destination": "tickets",
     "params": {"title": "Rotate the API keys", "project": "SEC", "priority": 2}},
]


def team_scenario(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "team_tickets.yaml"
    path.write_text(yaml.safe_dump({
        "name": "team_tickets",
        "description": "A team's one-ticket tool, run once per intent by the intent runner.",
        "destinations": {"tickets": {"service": "tickets", "idempotency": "stripe", "lookup": "client_reference",
                                     "agent_env": {"TICKETS_URL": "{url}"}}},
        "intents": INTENTS,
        "agent_log": "none",
        "expect": {"effects": {"tickets": 2}},
        **extra,
    }))
    return path


def run(tmp_path: Path, scenario: Path, words: list[str], *, exit_zero: bool = False) -> ScenarioResult:
    tool = tmp_path / "team_tool.py"
    tool.write_text(TEAM_TOOL)
    agent = shlex.join(runner_command(["python", str(tool), *words], exit_zero=exit_zero))
    return run_scenario(load(scenario), agent=agent, evidence_root=tmp_path / "ev")


def argvs(result: ScenarioResult) -> list[list[str]]:
    return [json.loads(line) for line in (result.evidence_dir / "agent.stdout").read_text().splitlines()]


def posts(result: ScenarioResult) -> list[str | None]:
    journal = (result.evidence_dir / "journal.ndjson").read_text().splitlines()
    return [entry["idempotency_key"] for entry in map(json.loads, journal) if entry["method"] == "POST"]


def expected_argv(intent: dict[str, Any], *tail: str) -> list[str]:
    params = intent["params"]
    return ["create", "--title", params["title"], "--project", params["project"], "--priority",
            str(params["priority"]), "--key", f"team-{intent['intent_id']}", *tail]


def test_the_command_runs_once_per_intent_each_param_one_argument(tmp_path: Path) -> None:
    result = run(tmp_path, team_scenario(tmp_path), TEMPLATE)
    assert result.passed, render_result(result)
    # "Printer on fire" is one argument, not three; the priority 1 is the text "1"
    assert argvs(result) == [expected_argv(INTENTS[0]), expected_argv(INTENTS[1])]
    assert posts(result) == ["team-printer-on-fire", "team-rotate-keys"]
    said = (result.evidence_dir / "agent.stderr").read_text().splitlines()
    assert [line.split(" after ")[0] for line in said] == ["intent printer-on-fire: exit 0",
                                                           "intent rotate-keys: exit 0"]


def test_after_a_planned_crash_the_interrupted_intent_runs_again_and_then_the_rest(tmp_path: Path) -> None:
    """The first intent finishes; the second's answer is held and the agent's group killed once its ticket is
    committed; the restart skips the first, runs the second again (same key: replayed) and ends."""
    scenario = team_scenario(tmp_path, restart_agent={"after_effects": 2}, faults=[{
        "id": "hold_second_create", "match": {"destination": "tickets", "method": "POST", "path": "/tickets", "nth": 2},
        "action": "hold_response", "hold_ms": 3000, "then": "drop"}])
    result = run(tmp_path, scenario, TEMPLATE)
    assert [run.killed_by_harness for run in result.agent_runs] == [True, False], render_result(result)
    assert argvs(result) == [expected_argv(INTENTS[0]), expected_argv(INTENTS[1]), expected_argv(INTENTS[1])]
    assert posts(result) == ["team-printer-on-fire", "team-rotate-keys", "team-rotate-keys"]
    state = json.loads((result.evidence_dir / "agent-state" / STATE_FILE).read_text())
    assert state == {"finished": {"printer-on-fire": 0, "rotate-keys": 0}}
    effects = json.loads((result.evidence_dir / "ledger.json").read_text())["effects"]
    assert len(effects) == 2, effects
    assert result.passed, render_result(result)


@pytest.mark.parametrize("exit_zero", [False, True], ids=["exit-status", "exit-zero"])
def test_a_tool_that_exits_non_zero_fails_the_run_unless_exit_zero(tmp_path: Path, exit_zero: bool) -> None:
    """The first intent's tool exits 3 (as a team's tool does when it gives up), the second's 0: both run; the
    runner exits 3 after both, or 0 with --exit-zero (black-box mode: the verdict rests on the evidence)."""
    result = run(tmp_path, team_scenario(tmp_path), [*TEMPLATE, "--fail-priority", "1"], exit_zero=exit_zero)
    assert len(argvs(result)) == 2  # the second intent ran after the first failed
    assert result.agent_runs[-1].exit_status == (0 if exit_zero else 3)
    assert result.passed is exit_zero, render_result(result)
    said = (result.evidence_dir / "agent.stderr").read_text()
    assert "intent printer-on-fire: exit 3 after " in said and "intent rotate-keys: exit 0 after " in said


def test_a_placeholder_no_intent_fills_stops_before_anything_runs(tmp_path: Path) -> None:
    result = run(tmp_path, team_scenario(tmp_path), [*TEMPLATE, "--note", "{params.note}"])
    assert result.agent_runs[-1].exit_status == 2 and not result.passed
    assert (result.evidence_dir / "agent.stderr").read_text() == (
        "python -m harness.intent_runner: word 13 '{params.note}', intent 'printer-on-fire': {params.note}: the "
        "intent has no params.note (its params: priority, project, title)\n")
    assert (result.evidence_dir / "agent.stdout").read_text() == ""  # no intent ran
    assert posts(result) == []


# -- the runner as a process, without the engine ----------------------------------------------------

def runner(tmp_path: Path, intents: list[dict[str, Any]], words: list[str], *, exit_zero: bool = False,
           **popen: Any) -> subprocess.Popen[str]:
    (tmp_path / "intents.json").write_text(json.dumps({"intents": intents, "destinations": {}}))
    (tmp_path / "state").mkdir(exist_ok=True)
    env = {**os.environ, INTENTS_ENV: str(tmp_path / "intents.json"), STATE_DIR_ENV: str(tmp_path / "state")}
    return subprocess.Popen(runner_command(words, exit_zero=exit_zero), env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_a_command_that_cannot_start_is_127_even_with_exit_zero(tmp_path: Path) -> None:
    proc = runner(tmp_path, INTENTS, ["./no-such-tool", "{intent_id}"], exit_zero=True)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 127
    assert err == ("python -m harness.intent_runner: intent printer-on-fire: cannot start './no-such-tool': No such "
                   "file or directory\n")


def test_sigterm_is_passed_to_the_command_and_its_intent_stays_unfinished(tmp_path: Path) -> None:
    """Signalled alone (its own session: the command is not signalled by the group), the runner passes SIGTERM on,
    waits for the command, records nothing for that intent and exits 128 + 15."""
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
              "print('running', flush=True)\n"
              "time.sleep(30)\n")
    proc = runner(tmp_path, INTENTS, ["python", "-c", script], start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "running\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert out == "got SIGTERM\n" and proc.returncode == 128 + signal.SIGTERM, err
    assert not (tmp_path / "state" / STATE_FILE).exists()


def test_a_restart_reads_what_finished_and_keeps_the_first_failure(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / STATE_FILE).write_text(json.dumps({"finished": {"printer-on-fire": 4}}))
    proc = runner(tmp_path, INTENTS, ["python", "-c", "import sys; print(sys.argv[1])", "{intent_id}"])
    out, err = proc.communicate(timeout=30)
    assert out == "rotate-keys\n" and proc.returncode == 4, err
    assert err.startswith("python -m harness.intent_runner: restarted: 1 of 2 intents had finished\n")
    assert json.loads((tmp_path / "state" / STATE_FILE).read_text()) == {
        "finished": {"printer-on-fire": 4, "rotate-keys": 0}}


def test_a_state_file_it_cannot_read_stops_it_before_any_intent(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / STATE_FILE).write_text('{"finished": ')
    proc = runner(tmp_path, INTENTS, ["python", "-c", "print('ran')"])
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (2, "")
    assert err.startswith(f"python -m harness.intent_runner: cannot read what finished before a restart from "
                          f"{tmp_path / 'state' / STATE_FILE}: JSONDecodeError(")


def test_it_imports_the_standard_library_and_the_contract_alone() -> None:
    """It starts every intent's command in the agent's environment: nothing of the harness's own dependencies."""
    code = ("import sys; before = set(sys.modules); import harness.intent_runner; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith(('harness', 'pydantic', 'yaml'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "['harness', 'harness.contract', 'harness.intent_runner']"


def test_runner_command_is_this_interpreter_and_the_words_after_a_separator() -> None:
    assert runner_command(["tool", "--x", "{kind}"], exit_zero=True) == [
        sys.executable, "-m", "harness.intent_runner", "--exit-zero", "--", "tool", "--x", "{kind}"]
    assert runner_command(["--tool"], exit_zero=False) == [sys.executable, "-m", "harness.intent_runner", "--",
                                                           "--tool"]


# -- the template ----------------------------------------------------------------------------------

INTENT = {"intent_id": "refund-1042", "kind": "refund", "destination": "billing",
          "params": {"order_id": "ord 1042", "amount": 1999, "rate": 0.5, "express": True, "note": None,
                     "customer": {"id": "cus_7", "tags": ["vip", 2]}, "empty": ""}}


@pytest.mark.parametrize("word, filled", [
    ("{params.order_id}", "ord 1042"),
    ("--amount={params.amount}", "--amount=1999"),
    ("{params.rate}", "0.5"),
    ("{params.express}", "true"),
    ("{params.customer.id}", "cus_7"),
    ("{params.customer.tags}", '["vip",2]'),
    ("{params.customer}", '{"id":"cus_7","tags":["vip",2]}'),
    ("{params.empty}", ""),
    ("{intent_id}/{kind}/{destination}", "refund-1042/refund/billing"),
    ("{{params.amount}}", "{params.amount}"),
    ("{{{params.amount}}}", "{1999}"),
    ("plain", "plain"),
])
def test_each_word_is_filled_on_its_own(word: str, filled: str) -> None:
    assert fill_words(["tool", word], INTENT) == ["tool", filled]


def test_all_params_are_compact_json() -> None:
    [word] = fill_words(["{params}"], INTENT)
    assert json.loads(word) == INTENT["params"] and ", " not in word


@pytest.mark.parametrize("words, message", [
    (["{params.amout}"], "word 1 '{params.amout}', intent 'refund-1042': {params.amout}: the intent has no "
                         "params.amout (its params: amount, customer, empty, express, note, order_id, rate)"),
    (["x", "{params.customer.name}"], "word 2 '{params.customer.name}', intent 'refund-1042': "
                                      "{params.customer.name}: the intent has no params.customer.name (its "
                                      "params.customer: id, tags)"),
    (["{params.order_id.x}"], "word 1 '{params.order_id.x}', intent 'refund-1042': {params.order_id.x}: "
                              "params.order_id is str, not a mapping"),
    (["{params.note}"], "word 1 '{params.note}', intent 'refund-1042': {params.note} is null, which a command "
                        "line cannot carry: give it a value, or leave the placeholder out"),
    # a word no intent could fill: check_template says so before reading any intent, and names none
    (["{amount}"], "word 1 '{amount}', intent 'refund-1042': unknown placeholder {amount}; valid: {params.NAME} "
                   "(dotted for a nested param: {params.customer.id}), {params}, {intent_id}, {kind}, {destination} "
                   "({{ and }} for literal braces)"),
    (["{params.amount"], "word 1 '{params.amount', intent 'refund-1042': a lone '{' at character 1: write '{{' "
                         "for a literal brace, {name} for a placeholder"),
])
def test_a_word_that_cannot_be_filled_names_the_word_the_intent_and_what_is_valid(words: list[str],
                                                                                   message: str) -> None:
    with pytest.raises(ValueError) as caught:
        fill_words(words, INTENT)
    assert str(caught.value) == message
    with pytest.raises(ValueError) as checked:
        check_template(words, [INTENT])
    any_intent = "unknown placeholder" in message or "a lone" in message
    assert str(checked.value) == (message.replace(", intent 'refund-1042'", "") if any_intent else message)


def test_a_word_that_fills_to_nul_is_refused() -> None:
    intent = {**INTENT, "params": {"order_id": "ord\0"}}
    with pytest.raises(ValueError, match="fills to a string holding a NUL character"):
        fill_words(["{params.order_id}"], intent)


def test_check_template_reads_the_placeholders_without_intents_and_the_params_of_each() -> None:
    check_template(["tool", "{params.anything}", "{intent_id}"], [])  # no intent: no param to look up
    with pytest.raises(ValueError, match="unknown placeholder {intent}; valid"):
        check_template(["tool", "{intent}"], [])
    with pytest.raises(ValueError, match="the command is empty"):
        check_template([], [INTENT])
    other = {**INTENT, "intent_id": "refund-7", "params": {"order_id": "ord_7"}}
    with pytest.raises(ValueError, match="intent 'refund-7': {params.amount}: the intent has no params.amount"):
        check_template(["tool", "{params.order_id}", "{params.amount}"], [INTENT, other])


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=10)
WORDS = st.lists(st.one_of(
    st.text(),
    st.sampled_from(["{params}", "{intent_id}", "{kind}", "{destination}", "{{", "}}", "{", "}", "{params.}"]),
    st.text(alphabet="abc.", min_size=1).map(lambda name: "{params." + name + "}"),
), max_size=4)


@settings(max_examples=300, deadline=None)
@given(params=st.dictionaries(st.text(alphabet="abc.", min_size=0, max_size=3), JSON_VALUES, max_size=4),
       words=WORDS)
def test_any_params_fill_every_word_or_raise_a_value_error(params: dict[str, Any], words: list[str]) -> None:
    intent = {"intent_id": "i-1", "kind": "k", "destination": "d", "params": params}
    try:
        argv = fill_words(words, intent)
    except ValueError:
        with pytest.raises(ValueError):
            check_template(words, [intent])
        return
    assert len(argv) == len(words) and all(isinstance(word, str) and "\0" not in word for word in argv)
    check_template(words or ["tool"], [intent])
    for word, filled in zip(words, argv, strict=True):
        if "{" not in word and "}" not in word:
            assert filled == word


def test_the_round_trip_of_a_number_is_its_json() -> None:
    """A number becomes the text JSON writes for it, which reads back to the same number."""
    for number in (0, -7, 1999, 10**30, 0.1, 1e-9, 2.5e300):
        [word] = fill_words(["{params.n}"], {**INTENT, "params": {"n": number}})
        assert json.loads(word) == number
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="which JSON cannot write"):
            fill_words(["{params.n}"], {**INTENT, "params": {"n": bad}})


def test_a_slow_intent_is_timed(tmp_path: Path) -> None:
    proc = runner(tmp_path, INTENTS[:1], ["python", "-c", "import time; time.sleep(0.3)"])
    _, err = proc.communicate(timeout=30)
    seconds = float(err.split(" after ")[1].split(" s")[0])
    assert proc.returncode == 0 and 0.3 <= seconds < 5
