"""Audit error messages, tested from files: each ``errors/NAME.ndjson`` beside its ``NAME.expected`` text."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from harness.cli import run_audit

ERRORS = Path(__file__).parent / "errors"


@pytest.mark.parametrize("example", sorted(p.stem for p in ERRORS.glob("*.ndjson")))
def test_audit_error_message(example, monkeypatch):
    monkeypatch.chdir(ERRORS)  # messages name the file as given on the command line
    out, err = io.StringIO(), io.StringIO()
    status = run_audit(Path(f"{example}.ndjson"), format="text", out=out, err=err)
    expected = (ERRORS / f"{example}.expected").read_text().strip()
    assert status == 2
    assert f"FAIL H000 log-well-formed: {expected}" in out.getvalue().splitlines()
    assert f"{example}.ndjson holds no usable audit event" in err.getvalue()
    assert os.getcwd() == str(ERRORS)


def test_a_line_that_is_not_utf8_is_malformed_alike_for_check_audit_and_verify(tmp_path):
    """A bad byte inside a string value: ``check`` and ``audit`` must not read it as U+FFFD text and judge
    the event, and ``verify`` must not refuse the whole file; all three name the line and the byte."""
    from harness.audit import load_log
    from harness.chain import verify_file
    from harness.checker import check
    from tests.common.logs import late_observation_log

    log = late_observation_log(tmp_path / "agent_log.ndjson", 2, chain=True)
    lines = log.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"att_0"', b'"att_\xff0"', 1)  # line 2: the attempt of op_0
    log.write_bytes(b"\n".join(lines))
    why = "not UTF-8 text (byte 0xff at byte "

    out, err = io.StringIO(), io.StringIO()
    assert run_audit(log, format="text", out=out, err=err) == 1
    audit_h000 = [line for line in out.getvalue().splitlines() if "H000" in line]
    assert len(audit_h000) == 1 and f"{log}:2: {why}" in audit_h000[0], out.getvalue()

    checked = [f for f in check(load_log(log), offline=True).findings if f.code == "H000"]
    assert len(checked) == 1 and f"{log}:2: {why}" in checked[0].message, checked
    assert "\ufffd" not in out.getvalue() + "".join(f.message for f in checked)

    intact, message = verify_file(log)
    assert not intact and message.startswith(f"line 2: {why}") and "the chain is broken here" in message
