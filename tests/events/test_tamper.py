"""Every single-line tamper class against every verify mode: detected, or honestly reported as not covered.

The table this holds is docs/checker.md's "Tamper evidence: what verify proves".
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from harness.chain import checkpoint, link, record_checkpoint
from harness.cli import main
from harness.recorder import Recorder

KEY = b"operator-key-0123456789abcdef"


def chained_log(path: Path, session: str = "ses_1") -> str:
    with Recorder(path, session_id=session, chain=True) as rec:
        for n in range(3):
            rec.operation(f"op_{n}", intent_id=f"int_{n}")
            rec.attempt(f"op_{n}", f"att_{n}", "response_received", effect_refs=[f"tkt_{n}"])
            rec.resolution(f"op_{n}", "succeeded", effect_refs=[f"tkt_{n}"], evidence=[f"att_{n}"])
        return rec.head


def _edit(lines: list[str], tmp: Path) -> list[str]:
    record = json.loads(lines[4])
    record["effect_refs"] = ["tkt_forged"]
    return lines[:4] + [json.dumps(record)] + lines[5:]


def _append_linked(lines: list[str], tmp: Path) -> list[str]:
    last = json.loads(lines[-1])
    forged = link({"event": "resolution", "ts": 1.0, "session_id": "ses_1", "operation_id": "op_0",
                   "state": "failed", "reason": "forged"}, last["seq"] + 1, last["hash"])
    return [*lines, json.dumps(forged)]


def _rewrite(lines: list[str], tmp: Path) -> list[str]:  # a new, consistent chain of the same length
    other = tmp / "other.ndjson"
    chained_log(other, session="ses_forged")
    return other.read_text().splitlines()


TAMPERS = {
    "edit": _edit,
    "delete": lambda lines, tmp: lines[:3] + lines[4:],
    "insert": lambda lines, tmp: lines[:3] + [lines[5]] + lines[3:],
    "reorder": lambda lines, tmp: [lines[0], lines[2], lines[1], *lines[3:]],
    "append_linked": _append_linked,
    "truncate": lambda lines, tmp: lines[:-2],
    "rewrite": _rewrite,
    "empty": lambda lines, tmp: [],
}
DETECTED, UNCOVERED, UNSEEN = "detected", "reported not covered", "passes, with the no-head warning"
# what each mode says of each tamper (docs/checker.md holds the same table)
EXPECTED = {
    "none": {"edit": DETECTED, "delete": DETECTED, "insert": DETECTED, "reorder": DETECTED,
             "append_linked": UNSEEN, "truncate": UNSEEN, "rewrite": UNSEEN, "empty": UNSEEN},
    "head": {**dict.fromkeys(TAMPERS, DETECTED), "append_linked": UNCOVERED},
    "final_head": dict.fromkeys(TAMPERS, DETECTED),
    "checkpoint": dict.fromkeys(TAMPERS, DETECTED),
}


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["verify", *args])
    return status, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("mode", EXPECTED)
@pytest.mark.parametrize("tamper", TAMPERS)
def test_tamper_against_mode(tmp_path, tamper, mode):
    log = tmp_path / "agent.ndjson"
    head = chained_log(log)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    cp = tmp_path / "agent.checkpoint.json"
    cp.write_text(json.dumps(checkpoint(log, KEY)))
    lines = TAMPERS[tamper](log.read_text().splitlines(), tmp_path)
    log.write_text("".join(line + "\n" for line in lines))
    flags = {"none": [], "head": ["--head", head], "final_head": ["--final-head", head],
             "checkpoint": ["--checkpoint", str(cp), "--key-file", str(key_file)]}[mode]
    status, out = run(str(log), *flags)
    expected = EXPECTED[mode][tamper]
    if expected == DETECTED:
        assert status == 1, out
    elif expected == UNCOVERED:
        assert status == 0 and "1 event(s) after it are not covered by it" in out, out
    else:
        assert status == 0 and "no known head" in out and "rewritten, cut or emptied" in out, out


def test_messages_name_what_happened(tmp_path):
    log = tmp_path / "agent.ndjson"
    head = chained_log(log)
    original = log.read_text().splitlines()
    cases = [("truncate", "--head", "events were cut from the end"),
             ("rewrite", "--head", "line 9: seq 9 has hash"),
             ("append_linked", "--final-head", "1 event(s) after the final head seq 9 (line 9)"),
             ("empty", "--head", "the log ends at seq 0 without reaching seq 9")]
    for tamper, flag, text in cases:
        log.write_text("".join(line + "\n" for line in TAMPERS[tamper](original, tmp_path)))
        status, out = run(str(log), flag, head)
        assert status == 1 and text in out, (tamper, out)


def test_a_forged_checkpoint_or_a_wrong_key_is_not_proof(tmp_path):
    log = tmp_path / "agent.ndjson"
    chained_log(log)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    recorded = checkpoint(log, KEY)
    forged = dict(recorded, bytes=recorded["bytes"] - 10)
    cp = tmp_path / "cp.json"
    cp.write_text(json.dumps(forged))
    status, out = run(str(log), "--checkpoint", str(cp), "--key-file", str(key_file))
    assert status == 1 and "HMAC does not match" in out
    cp.write_text(json.dumps(recorded))
    (tmp_path / "other").write_bytes(b"another-key-0123456789")
    status, out = run(str(log), "--checkpoint", str(cp), "--key-file", str(tmp_path / "other"))
    assert status == 1 and "HMAC does not match" in out
    status, out = run(str(log), "--checkpoint", str(cp))
    assert status == 2 and "needs its key" in out


def test_an_evidence_folder_verifies_against_its_checkpoint(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_CHECKPOINT_KEY_FILE", raising=False)
    chained_log(tmp_path / "agent.ndjson")
    record_checkpoint(tmp_path)
    status, out = run(str(tmp_path))
    assert status == 0 and "log unchanged since its checkpoint" in out and "the run's own key" in out
    key_file = tmp_path.parent / f"{tmp_path.name}.key"
    key_file.write_bytes(KEY)
    monkeypatch.setenv("HARNESS_CHECKPOINT_KEY_FILE", str(key_file))
    record_checkpoint(tmp_path)
    status, out = run(str(tmp_path))
    assert status == 0 and "per-run key" not in out


def test_a_scenario_runs_evidence_verifies_and_a_forged_append_is_detected(tmp_path, monkeypatch):
    from harness.engine import run_scenario
    from harness.resources import catalogue_dir
    from harness.scenario import load

    monkeypatch.delenv("HARNESS_CHECKPOINT_KEY_FILE", raising=False)
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"), evidence_root=tmp_path)
    folder = result.evidence_dir
    status, out = run(str(folder))
    assert status == 0, out
    log = folder / "agent.ndjson"
    last = log.read_text().splitlines()[-1]
    with log.open("a") as handle:  # a forged line after the run: the agent's own last line, once more
        handle.write(last + "\n")
    status, out = run(str(folder))
    assert status == 1 and "appended after the checkpoint was made" in out, out
