"""`check` gives the run's own pass/fail, and evidence the harness lost is INCOMPLETE, never judged.

Real runs through the CLI and the pytest plugin, as a user or CI starts them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from harness.contract import COMPLETENESS_KEY, EvidenceLayout
from harness.resources import catalogue_dir

EXIT_INCOMPLETE = 3


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=timeout)


def variant(tmp_path: Path, name: str, **changes: object) -> Path:
    data = yaml.safe_load((catalogue_dir() / "response_lost.yaml").read_text())
    data.update(name=name, **changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def evidence_folder(run: subprocess.CompletedProcess[str]) -> Path:
    return Path(json.loads(run.stdout.splitlines()[-1])["evidence"])


def test_check_applies_the_scenarios_expectations_as_the_run_did(tmp_path: Path) -> None:
    """The checker finds nothing wrong, but the scenario expects two tickets: the run fails on X001,
    and so does `check` on its folder (the expectations are kept in context.json)."""
    path = variant(tmp_path, "expects_two", expect={"states": {"printer-on-fire": "succeeded"},
                                                    "effects": {"tickets": 2}})
    run = harness("run", str(path), "--evidence-dir", str(tmp_path / "ev"), "--format", "json")
    assert run.returncode == 1, run.stdout + run.stderr
    folder = evidence_folder(run)
    assert json.loads(EvidenceLayout(folder).context.read_text())["expect"]["effects"] == {"tickets": 2}
    again = harness("check", str(folder))
    assert again.returncode == 1, again.stdout + again.stderr
    # the expectation is part of the verdict: it never reads PASSED beside a failed expectation
    assert "verdict: PASSED" not in again.stdout, again.stdout
    assert "verdict: FAILED (1 operation(s), 1 finding(s), 1 of them the scenario's own expectations (X001))" \
        in again.stdout
    assert "FAIL X001 scenario-expectation: destination tickets holds 1 distinct effect(s)" in again.stdout
    assert "expected 2" in again.stdout and "ledger effects seq 1: effect tkt_" in again.stdout
    as_json = json.loads(harness("check", str(folder), "--format", "json").stdout)
    assert (as_json["passed"], as_json["verdict_passed"], as_json["rules_passed"], as_json["outcome"]) == (
        False, False, True, "failed")
    [unmet] = [f for f in as_json["findings"] if f["code"] == "X001"]
    assert unmet["rule"] == "scenario-expectation" and unmet["message"] == as_json["expectation_failures"][0]
    assert unmet["evidence"][0]["source"] == "ledger" and unmet["evidence"][0]["effect_ref"].startswith("tkt_")


def test_check_of_a_folder_the_harness_did_not_finish_is_incomplete_exit_3(tmp_path: Path) -> None:
    """A run stopped before its teardown: no completeness mark, no ledger. A correct agent's log is
    there; judging it would blame the agent (no effect, phantom attempts): `check` says INCOMPLETE."""
    run = harness("run", "response_lost", "--evidence-dir", str(tmp_path), "--format", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    layout = EvidenceLayout(evidence_folder(run))
    assert harness("check", str(layout.folder)).returncode == 0
    context = json.loads(layout.context.read_text())
    context[COMPLETENESS_KEY] = {"complete": False}  # as a killed run leaves it
    layout.context.write_text(json.dumps(context))
    layout.ledger_dump.unlink()
    again = harness("check", str(layout.folder))
    assert again.returncode == EXIT_INCOMPLETE, again.stdout + again.stderr
    assert again.stdout.startswith("INCOMPLETE: the harness lost evidence")
    assert "ledger.json is missing" in again.stdout
    assert "H015" not in again.stdout and "H018" not in again.stdout and "FAIL" not in again.stdout
    as_json = json.loads(harness("check", str(layout.folder), "--format", "json").stdout)
    assert as_json["outcome"] == "incomplete" and any("ledger.json" in gap for gap in as_json["incomplete"])


def test_check_help_documents_exit_status_3() -> None:
    assert "3 INCOMPLETE" in harness("check", "--help").stdout
    assert "3 incomplete evidence" in harness("--help").stdout


def never_answers(tmp_path: Path) -> Path:
    """The destination takes longer than the agent's patience and the proxy's bounded drain: when the
    run ends it has the request but has not answered, so whether it commits is unknown."""
    return variant(tmp_path, "destination_never_answers", faults=[], destinations={"tickets": {
        "service": "tickets", "idempotency": "stripe", "lookup": "client_reference",
        "processing_delay_seconds": 40}})


def test_run_says_incomplete_with_exit_3_when_a_destination_was_still_writing(tmp_path: Path) -> None:
    run = harness("run", str(never_answers(tmp_path)), "--evidence-dir", str(tmp_path / "ev"))
    assert run.returncode == EXIT_INCOMPLETE, run.stdout + run.stderr
    assert "destination_never_answers with agent 'python -m harness.agents.reference': INCOMPLETE" in run.stdout
    assert "destination tickets was still processing 1 write(s)" in run.stdout and "X001" not in run.stdout
    folder = Path(run.stdout.split("evidence: ")[-1].strip())
    assert harness("check", str(folder)).returncode == EXIT_INCOMPLETE  # check says what the run said


def test_plugin_fails_an_incomplete_run_with_the_incomplete_message_not_findings(run_plugin, tmp_path: Path) -> None:
    path = never_answers(tmp_path)
    result = run_plugin("--scenario", str(path), timeout=150)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "INCOMPLETE: the harness lost evidence" in out and "destination tickets was still processing" in out
    assert "FAIL H0" not in out and "X001" not in out


def test_check_of_a_log_changed_since_its_checkpoint_is_incomplete(tmp_path: Path) -> None:
    """The harness checkpoints the agent log when the agent exits. A log edited afterwards (here one
    event cut, as someone hiding a second attempt would) is not the agent's record any more: `check`
    says INCOMPLETE and names the checkpoint, instead of judging the edited log."""
    run = harness("run", "response_lost", "--evidence-dir", str(tmp_path), "--format", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    layout = EvidenceLayout(evidence_folder(run))
    lines = layout.agent_log.read_text().splitlines(keepends=True)
    layout.agent_log.write_text("".join(lines[:-2] + lines[-1:]))
    again = harness("check", str(layout.folder))
    assert again.returncode == EXIT_INCOMPLETE, again.stdout + again.stderr
    assert "agent log: not the log the harness checkpointed when the agent exited" in again.stdout
    assert "bytes differ from the checkpointed ones" in again.stdout or "it was cut" in again.stdout


def test_check_needs_the_operators_key_for_an_operator_checkpoint(tmp_path: Path) -> None:
    """With the operator's key (HARNESS_CHECKPOINT_KEY_FILE at run time) no key is left in the folder:
    `check` without it cannot vouch for the log (INCOMPLETE, saying how to give it); with it, it judges."""
    import os

    key = tmp_path / "operator.key"
    key.write_text("k" * 32)
    run = subprocess.run([sys.executable, "-m", "harness", "run", "response_lost", "--evidence-dir",
                          str(tmp_path / "ev"), "--format", "json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HARNESS_CHECKPOINT_KEY_FILE": str(key)})
    assert run.returncode == 0, run.stdout + run.stderr
    folder = evidence_folder(run)
    without = harness("check", str(folder))
    assert without.returncode == EXIT_INCOMPLETE, without.stdout + without.stderr
    assert "its checkpoint cannot be checked" in without.stdout and "--key-file" in without.stdout
    assert harness("check", str(folder), "--key-file", str(key)).returncode == 0
