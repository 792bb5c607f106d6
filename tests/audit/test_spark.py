"""The audit's Spark engine (harness/audit/spark_engine.py) on a real local Spark (local[2]): the ``lines`` view
against Python's text-mode reading, ``features`` (mapInArrow + DuckDB in the workers) against DuckDB run
directly, ``register`` + ``query`` order, ``close()``: no JVM, no Python worker, no temporary folder left,
nothing on stdout; and a cluster master (local-cluster: executors in JVMs of their own) running the same code."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark engine's tests need pyspark (pip install -e '.[spark]'; CI has it)")

from harness.audit import triage  # noqa: E402
from harness.audit.spark_engine import SparkEngine, pid_alive  # noqa: E402
from harness.errors import EvidenceError  # noqa: E402

SPLITS = 4  # every file is read in (at least) 4 splits, so lines meet split boundaries


@pytest.fixture(scope="module")
def engine() -> Iterator[SparkEngine]:
    with SparkEngine("local[2]", min_partitions=SPLITS) as spark:
        yield spark


def python_lines(*paths: Path) -> list[tuple[int, str | None]]:
    """What Python's text mode reads (universal newlines, bad bytes as U+FFFD), numbered through the files,
    an empty line as None."""
    texts = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace", newline=None) as handle:
            texts.extend(line[:-1] if line.endswith("\n") else line for line in handle)
    return [(number, text or None) for number, text in enumerate(texts, 1)]


def mixed_endings(seed: int, size: int) -> bytearray:
    """Random short lines (some empty), each ended by \\n, \\r\\n or a lone \\r."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += "".join(rng.choice("ab{}\":é ") for _ in range(rng.randrange(0, 12))).encode()
        out += rng.choice([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\r\n"])
    return out


def on_boundaries(size: int = 4 * 256) -> bytes:
    """A file of ``size`` bytes whose SPLITS splits (Hadoop cuts at multiples of size / SPLITS) begin: between
    the \\r and the \\n of a \\r\\n; right after a lone \\r; right after a \\n. Its last line has no newline."""
    data = mixed_endings(7, size)[:size]
    step = size // SPLITS
    data[step - 1:step + 1] = b"\r\n"
    data[2 * step - 1:2 * step + 1] = b"\rx"
    data[3 * step - 1:3 * step + 1] = b"\ny"
    data[-2:] = b"zz"
    return bytes(data)


def test_lines_are_numbered_through_the_files_as_python_reads_them(engine: SparkEngine, tmp_path: Path) -> None:
    first, second = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    first.write_bytes(on_boundaries())
    second.write_bytes(b"\r\n\n" + mixed_endings(8, 3000) + b"last, no newline")
    assert engine.spark.sparkContext.textFile(first.as_uri(), SPLITS).getNumPartitions() == SPLITS
    assert engine.load([str(first), str(second)]) == [(str(first), len(python_lines(first))),
                                                       (str(second), len(python_lines(second)))]
    got = list(engine.query("SELECT line, text FROM lines ORDER BY line"))
    assert got == python_lines(first, second)
    assert got[len(python_lines(first))] == (len(python_lines(first)) + 1, None)  # b's first line: empty
    assert got[-1][1] == "last, no newline"
    # the view itself is in file order too (what the features are computed over)
    assert [line for line, _ in engine.query("SELECT line, text FROM lines")] == list(range(1, len(got) + 1))


def test_a_glob_reads_its_matches_in_name_order(engine: SparkEngine, tmp_path: Path) -> None:
    names = ["2026-12-02.ndjson", "2026-12-01.ndjson", "x[1].ndjson", "2026-12-01b.ndjson"]
    for index, name in enumerate(names):
        (tmp_path / name).write_bytes(mixed_endings(index, 200 * (index + 1)))
    (tmp_path / "notes.txt").write_text("not a log\n")
    in_order = sorted(tmp_path / name for name in names)
    loaded = engine.load([str(tmp_path / "*.ndjson")])
    assert loaded == [(str(path), len(python_lines(path))) for path in in_order]
    assert list(engine.query("SELECT line, text FROM lines ORDER BY line")) == python_lines(*in_order)
    # the arguments keep the order given (as DuckDB's read_csv of a list does); a file named twice is read once
    assert [name for name, _ in engine.load([str(in_order[1]), str(in_order[0]), str(in_order[1])])] == \
        [str(in_order[1]), str(in_order[0])]


def test_a_glob_matching_nothing_or_a_missing_file_is_said(engine: SparkEngine, tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="no file matches"):
        engine.load([str(tmp_path / "*.ndjson")])
    with pytest.raises(EvidenceError, match="no such file"):
        engine.load([str(tmp_path / "missing.ndjson")])
    with pytest.raises(EvidenceError, match="is a folder"):
        engine.load([str(tmp_path)])


def test_bytes_that_are_not_utf8_become_replacement_characters(engine: SparkEngine, tmp_path: Path) -> None:
    log = tmp_path / "bad.ndjson"
    # a lone continuation byte, a truncated 3-byte sequence, an overlong '/', an encoded surrogate, a code point
    # past U+10FFFF, a truncated 4-byte sequence at the end of a line
    log.write_bytes(b'{"a": "\x80"}\n{"b": "\xe2\x82"}\n\xc0\xafx\n\xed\xa0\x80y\n\xf4\x90\x80\x80z\nok\xf0\x9f\x98\n')
    engine.load([str(log)])
    got = list(engine.query("SELECT line, text FROM lines ORDER BY line"))
    want = python_lines(log)
    # the one difference: Java makes an encoded surrogate one U+FFFD, Python one per byte
    assert want[3] == (4, "\ufffd\ufffd\ufffdy")
    want[3] = (4, "\ufffdy")
    assert got == want
    assert all("\ufffd" in text for _, text in got)


def test_features_are_the_triage_sql_run_by_duckdb(engine: SparkEngine, tmp_path: Path) -> None:
    import duckdb
    import pyarrow as pa

    log = tmp_path / "audit.ndjson"
    rng = random.Random(3)
    with log.open("w", encoding="utf-8") as out:
        for n in range(25_000):  # several partitions, several Arrow batches (10,000 rows a batch) in some
            kind = rng.random()
            if kind < 0.05:
                out.write("\n")
            elif kind < 0.1:
                out.write("not json {\n")
            else:
                out.write(json.dumps({"event": "attempt", "operation_id": f"op_{n // 7}", "n": n}) + "\n")
    engine.load([str(log)])
    engine.features()
    got = list(engine.query("SELECT * FROM features ORDER BY line"))
    lines = python_lines(log)
    table = pa.table({"line": pa.array([n for n, _ in lines], pa.int64()),
                      "text": pa.array([t for _, t in lines], pa.string())})
    with duckdb.connect() as con:
        triage.prepare(con)
        con.register("lines", table)
        want = [tuple(row) for row in con.sql(f"SELECT * FROM ({triage.features_sql()}) ORDER BY line").fetchall()]
    assert len(got) == sum(1 for _, text in lines if text)  # a blank line has no features
    assert got == want
    # cached: a second query reads the same rows
    assert list(engine.query("SELECT count(*) FROM features")) == [(len(got),)]


def test_register_and_query_keep_the_order_by(engine: SparkEngine, tmp_path: Path) -> None:
    values = [f"op_{n:05d}" for n in range(3000)]
    random.Random(5).shuffle(values)
    engine.register("forced", "op", values)
    assert list(engine.query("SELECT op FROM forced ORDER BY op DESC")) == [(v,) for v in sorted(values, reverse=True)]
    log = tmp_path / "many.ndjson"
    log.write_text("".join(f"line {n}\n" for n in range(10_000)))
    engine.load([str(log)])
    assert list(engine.query("SELECT line FROM lines ORDER BY line DESC")) == [(n,) for n in range(10_000, 0, -1)]
    # a join and a GROUP BY, ordered by an aggregate then a key
    engine.register("wanted", "text", ["line 1", "line 22", "line 333", "line 22", "absent"])
    rows = list(engine.query("SELECT w.text, count(*) AS c, min(l.line) FROM wanted w JOIN lines l ON l.text = w.text "
                             "GROUP BY w.text ORDER BY c DESC, w.text"))
    assert rows == [("line 22", 2, 23), ("line 1", 1, 2), ("line 333", 1, 334)]
    engine.register("empty", "op", [])
    assert list(engine.query("SELECT op FROM empty")) == []


CLOSE_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from harness.audit.spark_engine import SparkEngine, descendants
    log = sys.argv[1]
    engine = SparkEngine("local[2]")
    loaded = engine.load([log])
    engine.features()
    rows = list(engine.query("SELECT line, text FROM lines ORDER BY line"))
    features = list(engine.query("SELECT count(*) FROM features"))
    engine.register("forced", "op", ["a"])
    list(engine.query("SELECT op FROM forced"))
    def command(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().replace(b"\\0", b" ").decode(errors="replace")
        except OSError:
            return ""
    # the JVM (spark-submit), its Python workers' daemon and workers
    below = {pid: command(pid) for pid in descendants(os.getpid())}
    tmpdir = str(engine.tmpdir)
    with engine:  # the context manager closes it; close() once more is nothing
        pass
    engine.close()
    print(json.dumps({"loaded": loaded, "rows": rows, "features": features, "below": below, "tmpdir": tmpdir,
                      "left": descendants(os.getpid()), "tmp_exists": os.path.exists(tmpdir)}))
""")


@pytest.fixture(scope="module")
def closed_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A process that starts an engine, loads, computes features, queries, closes; its stdout and what it saw."""
    folder = tmp_path_factory.mktemp("spark_close")
    log = folder / "log.ndjson"
    log.write_text('{"a": 1}\n\n{"b": 22}\n')
    proc = subprocess.Popen([sys.executable, "-c", CLOSE_SCRIPT, str(log)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:  # a hung run: its whole group (the JVM is in it) is killed, nothing is left
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, stderr
    return {"stdout": stdout, "stderr": stderr, "log": str(log)}


def test_nothing_but_the_callers_output_reaches_stdout(closed_run: dict[str, Any]) -> None:
    lines = closed_run["stdout"].splitlines()
    assert len(lines) == 1, closed_run["stdout"]
    report = json.loads(lines[0])
    assert report["loaded"] == [[closed_run["log"], 3]]
    assert report["rows"] == [[1, '{"a": 1}'], [2, None], [3, '{"b": 22}']]
    assert report["features"] == [[2]]  # the blank line has none


def test_close_leaves_no_jvm_no_worker_no_temporary_folder(closed_run: dict[str, Any]) -> None:
    report = json.loads(closed_run["stdout"])
    below = {int(pid): command for pid, command in report["below"].items()}
    assert any("org.apache.spark.deploy.SparkSubmit" in command for command in below.values()), below
    assert any("pyspark.daemon" in command for command in below.values()), below
    assert report["left"] == []  # no child of the process once close() returned
    assert [pid for pid in below if pid_alive(pid)] == []  # nor anything they started, reparented
    # pgrep -f, for this run's JVM only: its command line names the run's temporary folder
    assert [pid for pid in _all_pids() if report["tmpdir"] in _command(pid)] == []
    assert report["tmp_exists"] is False and not os.path.exists(report["tmpdir"])


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


CLUSTER_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from harness.audit.spark_engine import SparkEngine, descendants
    conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    with SparkEngine("local-cluster[1,1,1024]", conf=conf) as engine:
        loaded = engine.load([sys.argv[1], sys.argv[2]])
        engine.features()
        rows = list(engine.query("SELECT line, kind, ok FROM features ORDER BY line"))
    print(json.dumps({"loaded": loaded, "rows": rows, "left": descendants(os.getpid())}))
""")


def test_a_cluster_master_runs_the_same_code_in_executors_of_their_own(tmp_path: Path) -> None:
    # local-cluster: a Spark master, a worker and its executor, each a JVM of its own, as on a real cluster
    # (the non-local path: no local settings; the executors' Python from PYSPARK_PYTHON)
    first, second = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    first.write_bytes(b'{"a": 1}\r\n\rtwo')
    second.write_bytes(b"three\n")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER_SCRIPT, str(first), str(second)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["loaded"] == [[str(first), 3], [str(second), 1]]
    # the features of the lines that are not blank, computed by DuckDB in the cluster's executor
    assert report["rows"] == [[1, "loose", False], [3, "loose", False], [4, "loose", False]]
    assert report["left"] == []


def test_the_audit_on_spark_writes_what_the_embedded_engine_writes(engine: SparkEngine, tmp_path: Path) -> None:
    """The whole audit, byte for byte, on Spark and on DuckDB: random logs of every kind of story (malformed and
    blank lines, secrets, blind retries), the article's format, and a glob of two files read as one log."""
    import io

    from harness.audit import audit_file
    from tests.common.logs import write_log

    article = Path(__file__).parent / "fixtures" / "article_four_operations.ndjson"
    logs = [write_log(tmp_path / f"log{seed}.ndjson", seed, count=80) for seed in range(2)]
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "a.ndjson").write_text(logs[0].read_text())
    (tmp_path / "day" / "b.ndjson").write_text(article.read_text())
    for target in [*logs, article, tmp_path / "day" / "*.ndjson"]:
        outputs = []
        for chosen in ("duckdb", engine):
            for fmt in ("json", "text"):
                out = io.StringIO()
                audit_file(str(target), format=fmt, out=out, engine=chosen)
                outputs.append(out.getvalue())
        assert outputs[:2] == outputs[2:], target
        assert '"operations": [' in outputs[0] and outputs[0].count('"operation_id"') > 3


def test_a_byte_that_is_not_utf8_is_judged_as_the_embedded_engine_judges_it(engine: SparkEngine,
                                                                             tmp_path: Path) -> None:
    """Hadoop decodes a bad byte as U+FFFD; the rules still read the file's own line, so a line that is not
    UTF-8 is malformed on Spark too (not a line naming an operation "op_\ufffd16"). And a line that truly holds
    U+FFFD is judged by the rules on every engine, alike."""
    import io

    from harness.audit import audit_file
    from tests.common.logs import write_log

    bad = write_log(tmp_path / "bad.ndjson", 3, count=20)
    lines = bad.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"op_', b'"op_\x80', 1)  # a bad byte in an operation id
    lines.insert(5, b'\xff\xfe{"event":"operation"}\n')  # a line that starts with two
    lines.append(lines[7].replace(b'"op_', b'"op_\xe2\x82', 1))  # a truncated sequence, last
    bad.write_bytes(b"".join(lines))
    literal = write_log(tmp_path / "literal.ndjson", 4, count=20)
    text = literal.read_text().splitlines(keepends=True)
    text[1] = text[1].replace('"op_', '"op_\ufffd', 1)  # valid UTF-8: U+FFFD itself
    literal.write_text("".join(text))
    for log in (bad, literal):
        outputs = {}
        for chosen in ("stream", "duckdb", engine):
            out = io.StringIO()
            audit_file(str(log), format="text", out=out, engine=chosen)
            outputs[getattr(chosen, "name", chosen)] = out.getvalue()
        assert outputs["spark"] == outputs["duckdb"] == outputs["stream"], log.name
        if log is bad:
            assert outputs["spark"].count("not UTF-8 text (byte 0x") == 3
            assert "op_\ufffd" not in outputs["spark"]
        else:
            assert "op_\ufffd" in outputs["spark"]
