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
