"""The CLI on a terminal and off it: colours (NO_COLOR, FORCE_COLOR, a pipe) and the progress line of long
work (a pseudo-terminal shows it; a pipe, CI and -q do not). The text without colour is the plain text."""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness import cli
from harness.colour import Paint, colour_wanted
from harness.progress import progress_line, progress_wanted
from harness.report import render_matrix
from harness.results.matrix import REFERENCE, Cell, Matrix

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ARTICLE = Path(__file__).parents[1] / "audit" / "fixtures" / "article_four_operations.ndjson"
REPO = Path(__file__).parents[2]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def sample_matrix() -> Matrix:
    return Matrix([
        Cell(REFERENCE, "s1", True, [], "e", facts={"effects": 1, "attempts": 2, "key_behaviour": "same key"}),
        Cell(REFERENCE, "s2", False, ["H015"], "e"),
        Cell("idle", "s1", False, ["H021"], "e", ["H021"]), Cell("idle", "s2", True, [], "e"),
        Cell("forger", "s1", False, ["H018"], "e", ["H015", "H018"]),
        Cell("mine", "s1", False, [], "", error="AgentError: boom", command="python mine.py", bundled=False),
    ])


# -- when to colour ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "tty", "wanted"), [
    ({}, True, True),
    ({}, False, False),  # a pipe, a file, a CI log
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": ""}, True, True),  # no-color.org: set *and not empty*
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False),  # NO_COLOR wins
    ({"TERM": "dumb"}, True, False),
])
def test_colour_follows_no_color_force_color_and_the_terminal(env, tty, wanted):
    assert colour_wanted(Tty() if tty else io.StringIO(), env) is wanted


def test_painted_text_without_its_colours_is_the_plain_text():
    matrix = sample_matrix()
    plain, painted = render_matrix(matrix), render_matrix(matrix, Paint(True))
    assert painted != plain and ANSI.sub("", painted) == plain
    assert render_matrix(matrix, Paint(False)) == plain
    assert "\x1b[1;31mF\x1b[0m" in painted and "\x1b[32mX\x1b[0m" in painted  # false alarm, caught
    report = ("scenario s with agent 'a': FAIL\nverdict: FAILED (1 operation(s), 1 finding(s))\n"
              "  FAIL H015 rule: message\n     - log line 3: event=attempt\nPASS: no schedule made it fail\n"
              "INCOMPLETE: lost\n  classification: healthy; FAIL is a word here\n")
    coloured = Paint(True).lines(report)
    assert ANSI.sub("", coloured) == report
    assert coloured.count("\x1b[31m") == 3 and coloured.count("\x1b[32m") == 1 and coloured.count("\x1b[33m") == 1


def _matrix_cli(tmp_path: Path, monkeypatch, capsys, env: dict[str, str]) -> tuple[str, list[Path]]:
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("harness.matrix.run_matrix", lambda *a, **k: sample_matrix())
    files = [tmp_path / "m.md", tmp_path / "m.json", tmp_path / "m.html"]
    status = cli.main(["matrix", "--scenario", "response_lost", "--markdown", str(files[0]), "--json", str(files[1]),
                       "--html", str(files[2]), "--evidence-dir", str(tmp_path)])
    assert status == 1
    return capsys.readouterr().out, files


def test_matrix_colours_only_when_forced_here_and_never_in_the_files(tmp_path, monkeypatch, capsys):
    piped, _ = _matrix_cli(tmp_path, monkeypatch, capsys, {})  # capsys is no terminal: a pipe
    assert not ANSI.search(piped)
    forced, files = _matrix_cli(tmp_path, monkeypatch, capsys, {"FORCE_COLOR": "1"})
    assert ANSI.search(forced) and ANSI.sub("", forced) == piped
    for path in files:
        assert "\x1b" not in path.read_text(encoding="utf-8"), path
    json.loads(files[1].read_text(encoding="utf-8"))
    refused, _ = _matrix_cli(tmp_path, monkeypatch, capsys, {"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert refused == piped


def _harness(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CI")}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=60,
                          env={**base, **env}, cwd=REPO)


def test_audit_text_in_a_pipe_is_plain_forced_it_is_coloured_and_json_never_is():
    piped = _harness("audit", str(ARTICLE), env={})
    assert piped.returncode == 1 and "FAIL H004" in piped.stdout and not ANSI.search(piped.stdout + piped.stderr)
    forced = _harness("audit", str(ARTICLE), env={"FORCE_COLOR": "1"})
    assert ANSI.search(forced.stdout) and ANSI.sub("", forced.stdout) == piped.stdout
    assert _harness("audit", str(ARTICLE), env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout == piped.stdout
    as_json = _harness("audit", str(ARTICLE), "--format", "json", env={"FORCE_COLOR": "1"})
    assert "\x1b" not in as_json.stdout and json.loads(as_json.stdout)["summary"]["events"] == 12


# -- the progress line ------------------------------------------------------------------------------------------

def test_progress_is_wanted_on_a_terminal_only_never_in_ci_or_quiet(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert progress_wanted(Tty()) and not progress_wanted(io.StringIO())
    assert not progress_wanted(Tty(), quiet=True)
    monkeypatch.setenv("FORCE_COLOR", "1")  # colours asked for, not a live display in a log
    assert not progress_wanted(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not progress_wanted(Tty())


def test_a_quiet_progress_line_is_a_no_op_and_a_bad_unit_an_error(capsys):
    with progress_line("x", 3) as update:  # pytest's stderr is no terminal
        update(1, 0)
    assert capsys.readouterr() == ("", "")
    with pytest.raises(ValueError, match="unit"), progress_line("x", 3, unit="lines"):
        pass


def mixed_log(path: Path, count: int) -> Path:
    """Clean operations, dedup retries and blind retries (tests/common/logs.py's stories), a third of them
    blind retries (unhealthy)."""
    from tests.common.logs import story

    kinds = ("clean", "retry", "blind")
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            out.writelines(json.dumps(line) + "\n" for line in story(n, kinds[n % 3], 1000.0 + n))
    return path


@pytest.mark.parametrize("engine,workers", [("stream", None), ("duckdb", None), ("typed", 1), ("typed", 2)])
def test_the_audit_tells_its_progress_on_every_engine(tmp_path, engine, workers):
    from harness.audit import audit_file

    path = mixed_log(tmp_path / "big.ndjson", 3000)
    heard: list[tuple[int, int]] = []
    summary = audit_file(path, format="json", out=io.StringIO(), engine=engine, workers=workers,
                         progress=lambda done, bad: heard.append((done, bad)))
    assert summary.operations == 3000 and summary.unhealthy == 1000
    assert len(heard) >= 2, heard
    assert [d for d, _ in heard] == sorted(d for d, _ in heard)  # bytes read only grow
    assert [b for _, b in heard] == sorted(b for _, b in heard)  # so do the unhealthy operations found
    assert heard[-1] == (path.stat().st_size, 1000)  # the end: the whole file, every unhealthy operation


PTY_AUDIT = """
import sys
from harness import cli
cli.AUDIT_PROGRESS_MIN_BYTES = 0  # the file here is small; the threshold is what is tested elsewhere
sys.exit(cli.main(sys.argv[1:]))
"""


def run_with_stderr_on_a_pty(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python *args`` with stderr on a pseudo-terminal (stdout a pipe): its status, stdout, and all the
    terminal saw."""
    master, slave = os.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CI")}
    stdout_file = tempfile.TemporaryFile()  # not a pipe: a long output must not block the child meanwhile
    process = subprocess.Popen([sys.executable, *args], stdout=stdout_file, stderr=slave, cwd=REPO,
                               env={**base, "TERM": "xterm-256color", "COLUMNS": "120", **(env or {})})
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                seen += chunk
            elif process.poll() is not None:
                break
        status = process.wait(timeout=30)
        stdout_file.seek(0)
        stdout = stdout_file.read().decode()
    finally:
        os.close(master)
        stdout_file.close()
        if process.poll() is None:
            process.kill()
    return status, stdout, seen.decode(errors="replace")


def test_a_large_audit_shows_progress_on_a_terminal_and_none_in_a_pipe_or_quiet(tmp_path):
    path = mixed_log(tmp_path / "big.ndjson", 3000)
    status, stdout, terminal = run_with_stderr_on_a_pty(["-c", PTY_AUDIT, "audit", str(path), "--format", "json"])
    assert status == 1
    assert "audit big.ndjson" in terminal and "unhealthy" in terminal and ANSI.search(terminal), terminal[-2000:]
    assert "\x1b" not in stdout and json.loads(stdout)["summary"]["operations"] == 3000  # stdout untouched

    status, stdout_quiet, quiet = run_with_stderr_on_a_pty(["-c", PTY_AUDIT, "audit", str(path), "--format", "json",
                                                            "-q"])
    assert status == 1 and quiet == "" and stdout_quiet == stdout

    piped = subprocess.run([sys.executable, "-c", PTY_AUDIT, "audit", str(path), "--format", "json"],
                           capture_output=True, text=True, timeout=120, cwd=REPO,
                           env={k: v for k, v in os.environ.items() if k != "CI"})
    assert piped.returncode == 1 and piped.stderr == "" and piped.stdout == stdout  # a CI log: nothing
    ci = run_with_stderr_on_a_pty(["-c", PTY_AUDIT, "audit", str(path), "--format", "json"], env={"CI": "true"})
    assert ci[2] == ""


def test_a_small_audit_shows_no_progress_even_on_a_terminal():
    status, stdout, terminal = run_with_stderr_on_a_pty(["-m", "harness", "audit", str(ARTICLE)])
    assert status == 1 and terminal == "" and "FAIL H004" in stdout


PTY_MATRIX = """
import sys, time
from harness import cli, matrix
from tests.front_ends.test_terminal import sample_matrix

def fake_run(agents, paths, evidence_root, *, jobs=1, black_box=False, progress=None, image=None):
    result = sample_matrix()
    for cell in result.cells:
        time.sleep(0.15)
        progress(cell)
    return result

matrix.run_matrix = fake_run
sys.exit(cli.main(sys.argv[1:]))
"""


def test_the_matrix_shows_progress_on_a_terminal_and_none_in_a_pipe_or_quiet(tmp_path):
    args = ["-c", PTY_MATRIX, "matrix", "--agent", "reference", "--agent", "idle", "--scenario", "response_lost",
            "--evidence-dir", str(tmp_path)]
    status, stdout, terminal = run_with_stderr_on_a_pty(args)
    assert status == 1
    assert "matrix" in terminal and "unexpected" in terminal, terminal[-2000:]
    assert re.search(r"\d/2 ", ANSI.sub("", terminal)), terminal[-2000:]  # items done of the cells planned
    assert "\x1b" not in stdout and "false-alarm: reference on s2" in stdout
    assert run_with_stderr_on_a_pty([*args, "-q"])[2] == ""
    piped = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=REPO,
                           env={k: v for k, v in os.environ.items() if k != "CI"})
    assert piped.stderr == "" and piped.stdout == stdout


PTY_COVERAGE = """
import sys, time
from harness import cli, coverage, matrix

def fake_measure(evidence_root, names=None, *, progress=None):
    stored = coverage.load()
    for done in range(1, len(stored) + 1):
        time.sleep(0.05)
        progress(done, 0)
    return stored

matrix.measure_coverage = fake_measure
sys.exit(cli.main(sys.argv[1:]))
"""


def test_coverage_says_what_it_runs_first_and_shows_progress_on_a_terminal_only():
    from harness.matrix import coverage_scenarios

    planned = len(coverage_scenarios())
    said = cli.coverage_announcement(planned)
    assert said.startswith(f"running the reference agent over {planned} scenarios") and re.search(
        r"\(about \d+-\d+ (s|minutes)\)\.\.\.$", said), said
    status, stdout, terminal = run_with_stderr_on_a_pty(["-c", PTY_COVERAGE, "coverage"])
    assert status == 0 and said in terminal
    assert "coverage" in ANSI.sub("", terminal).replace(said, "") and re.search(
        rf"\b{planned}/{planned}\b", ANSI.sub("", terminal)), terminal[-2000:]
    assert "\x1b" not in stdout and "transitions of the operation model" in stdout
    assert run_with_stderr_on_a_pty(["-c", PTY_COVERAGE, "coverage", "-q"])[2] == ""
    piped = subprocess.run([sys.executable, "-c", PTY_COVERAGE, "coverage"], capture_output=True, text=True,
                           timeout=120, cwd=REPO, env={k: v for k, v in os.environ.items() if k != "CI"})
    assert piped.returncode == 0 and piped.stderr == said + "\n" and piped.stdout == stdout  # a log: that line alone
