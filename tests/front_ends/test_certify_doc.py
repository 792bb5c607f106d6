"""docs/certify.md works as written: its files, written into an empty folder, and its commands, run from
there, give the verdicts it shows (the blind connector fails on the duplicate; with one stable key it passes;
the matrix writes its table)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "certify.md"
KEYED_LINE = 'headers={"Idempotency-Key": intent["intent_id"]}'


def documented_files(marker: str = "# file: ") -> dict[str, str]:
    """Every fenced block of the doc whose first line is ``# file: NAME`` (or another ``marker``)."""
    files = {}
    for block in re.findall(r"```(?:yaml|python)\n(.*?)```", DOC.read_text(), flags=re.S):
        first, _, rest = block.partition("\n")
        if first.startswith(marker):
            files[first.removeprefix(marker).strip()] = rest
    return files


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    files = documented_files()
    assert sorted(files) == ["apis/billing.yaml", "billing_response_lost.yaml", "connector.py"]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def harness(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=folder, capture_output=True, text=True,
                          timeout=180)


def test_the_documented_connector_fails_on_the_duplicate_and_passes_with_one_key(folder: Path) -> None:
    assert "python -m harness run billing_response_lost.yaml --agent \"python connector.py\"" in DOC.read_text()
    blind = harness(folder, "run", "billing_response_lost.yaml", "--agent", "python connector.py")
    assert blind.returncode == 1, blind.stdout + blind.stderr
    assert "FAIL H040 wire-single-effect: the destination committed 2 effect(s) (ch_000001, ch_000002) for " \
           "intent charge-2001" in blind.stdout
    assert "FAIL H041 wire-unknown-retry-keyed" in blind.stdout
    assert "not judged in black-box mode" in blind.stdout

    assert KEYED_LINE in DOC.read_text()  # the fix the doc names, applied as it says
    connector = folder / "connector.py"
    connector.write_text(connector.read_text().replace("timeout=1.0)", f"timeout=1.0, {KEYED_LINE})"))
    keyed = harness(folder, "run", "billing_response_lost.yaml", "--agent", "python connector.py")
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr


def test_the_documented_matrix_command_writes_its_table(folder: Path) -> None:
    command = "python -m harness matrix --agent \"blind=python connector.py\" --scenario 'billing_*.yaml' " \
              "--black-box \\\n    --markdown billing-matrix.md --json billing-matrix.json"
    assert command in DOC.read_text()
    done = harness(folder, "matrix", "--agent", "blind=python connector.py", "--scenario", "billing_*.yaml",
                   "--black-box", "--markdown", "billing-matrix.md", "--json", "billing-matrix.json")
    assert done.returncode == 1, done.stdout + done.stderr  # the blind connector's cell fails
    table = (folder / "billing-matrix.md").read_text()
    assert "blind" in table and "H040" in table and "no key" in table
    cells = json.loads((folder / "billing-matrix.json").read_text())["cells"]
    assert [(c["scenario"], c["passed"]) for c in cells] == [("billing_response_lost", False)]


def test_the_documented_client_class_is_right_on_the_wire_and_wrong_to_its_caller(folder: Path) -> None:
    """The section "What your client told its caller": a replayed 500 after the commit, one charge, one key, and
    the class says the charge failed: H049 alone; told unknown, it passes."""
    examples = documented_files("# example: ")
    assert sorted(examples) == ["billing_server_error_after_commit.yaml", "client_connector.py"]
    for name, text in examples.items():
        (folder / name).write_text(text)
    wrong = harness(folder, "run", "billing_server_error_after_commit.yaml", "--agent", "python client_connector.py")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "FAIL H049 wire-caller-told-the-truth: the program reported an error to its caller for intent " \
           "charge-2001 (agent.stdout line 1) while the destination committed ch_000001" in wrong.stdout
    assert "FAIL H040" not in wrong.stdout and "FAIL H041" not in wrong.stdout  # right on the wire
    fix = 'told = {"outcome": "unknown"}'
    assert fix in DOC.read_text()
    connector = folder / "client_connector.py"
    connector.write_text(connector.read_text().replace('told = {"outcome": "error"}', fix))
    right = harness(folder, "run", "billing_server_error_after_commit.yaml", "--agent", "python client_connector.py")
    assert right.returncode == 0, right.stdout + right.stderr
