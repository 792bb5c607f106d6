"""Seeded hostile logs through audit, verify and check: an exit status of 0, 1 or 2, never a traceback,
and a malformed line named by file and line. A few hundred cases from a fixed seed (about 10 s)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from harness.cli import main
from tests.fuzz.hostile_logs import cases

CASES = 300
BEYOND_LIMITS = {"deep": "nested deeper than 64 levels", "surrogate": "a lone surrogate escape",
                 "huge_int": "an integer of more than 400 digits"}


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))  # an exception here is the traceback this suite hunts
    return status, out.getvalue() + err.getvalue()


def judge(folder: Path, kind: str, data: bytes, line: int) -> list[str]:
    """What is wrong with how audit, verify and check took one hostile log (empty: nothing)."""
    log = folder / "agent.ndjson"
    log.write_bytes(data)
    problems = []
    status, out = run("audit", str(log))
    if status not in (0, 1, 2):
        problems.append(f"audit exit {status}")
    for finding in (text for text in out.splitlines() if "H000" in text and "malformed" not in text):
        if not re.search(re.escape(str(log)) + r":\d+", finding):
            problems.append(f"audit H000 without file:line: {finding}")
    if kind in BEYOND_LIMITS and f"FAIL H000 log-well-formed: {log}:{line}: {BEYOND_LIMITS[kind]}" not in out:
        problems.append(f"audit does not report line {line} as beyond the limits: {out[-300:]}")
    status, out = run("verify", str(log))
    if status not in (0, 1, 2):
        problems.append(f"verify exit {status}")
    if status == 1 and f"line {line}" not in out:
        problems.append(f"verify does not name line {line}: {out}")
    if status == 2 and f"{log}:{line}" not in out:
        problems.append(f"verify exit 2 without {log}:{line}: {out}")
    status, out = run("check", str(folder))
    if status not in (0, 1, 2):
        problems.append(f"check exit {status}")
    return problems


@pytest.mark.parametrize("chunk", range(6))
def test_hostile_logs(tmp_path, chunk):
    problems = []
    for number, (kind, data, line) in enumerate(cases(CASES)):
        if number % 6 != chunk:
            continue
        folder = tmp_path / f"case{number}"
        folder.mkdir()
        problems += [f"case {number} ({kind}, line {line}): {p}" for p in judge(folder, kind, data, line)]
    assert not problems, "\n".join(problems[:20])
