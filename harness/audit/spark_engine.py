"""The audit's Spark engine (design19.md, "Spark"): the ``AuditEngine`` interface over a SparkSession.

``SparkEngine()`` is a local Spark (``local[2]``) in this process's own JVM; ``SparkEngine("spark://host:7077")``
(or ``"yarn"``, ``"k8s://..."``) is the same code submitting to a cluster (docs/spark.md: the executors' Python
needs retry-harness, duckdb and pyarrow; the files must be readable by the executors at the same path, or be
on a shared store: ``hdfs://``, ``s3a://``).

``load(paths)`` registers the view ``lines(line BIGINT, text STRING)``: every line of the files (a glob's
matches in name order, the arguments in the order given), numbered from 1 through the files (the first line
of the second file is the first file's line count + 1), ``text`` NULL for an empty line (as DuckDB's
``read_csv`` gives it). Lines are split as Python's text mode splits them: a line ends at ``\\n``, ``\\r\\n`` or
a lone ``\\r`` (Hadoop's ``LineRecordReader``, also across the boundary of two splits of a file:
tests/audit/test_spark.py holds it equal to ``open(path, newline=None)``). The numbering is ``zipWithIndex``'s
(one pass counts each partition's lines, a second numbers them in partition order, which is file order), done
here by hand so the first pass also gives each file's line count; never ``monotonically_increasing_id``,
whose order is not the file's.

Bytes that are not UTF-8: Hadoop's ``Text`` decodes each line with Java's REPLACE action, so each bad
sequence becomes U+FFFD in ``lines`` (as Python's ``errors="replace"`` does, one U+FFFD per maximal invalid
subpart). The streaming audit instead keeps the bad bytes (``errors="surrogateescape"``) and names the line
"not UTF-8 text (byte 0x.. at byte N)". So a line holding U+FFFD is never triaged in SQL (FEATURES_SQL: not
plain), and ``lines_at`` gives the rules the file's own line, read again by the driver as the other engines read
it: the output is theirs. A file given by URI (``hdfs://``, ``s3a://``) is not read by the driver: there such a
line reaches the rules with U+FFFD in place of its bad bytes.

``features()`` runs ``harness.audit.triage.features_of_batch`` in the executors (``mapInArrow``: DuckDB over
each Arrow batch of lines) into the cached view ``features``; ``query(sql)`` streams a query's rows to
the driver in its ORDER BY order (``toLocalIterator``). ``close()`` stops the session, the JVM and the
Python workers it started, and removes the one temporary folder that holds Spark's local, warehouse and
checkpoint folders; it is idempotent, and the engine is a context manager.

Nothing goes to this process's stdout (the audit's output): the JVM's stdout (and so its Python workers')
is sent to stderr, the progress bar is off, and Spark logs warnings and worse, to stderr.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.audit.files import FileLines, matching, spans
from harness.errors import EvidenceError, HarnessError

LINES_DDL = "line BIGINT, text STRING"
# glob characters Hadoop would expand again in a file name Python's glob already matched
_HADOOP_GLOB = "\\*?[]{}"
# Spark's own logging to stderr at WARN, less two warnings every local session prints (no native Hadoop
# library; spark.local.dir may be overridden by a cluster manager)
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.conf.name = org.apache.spark.SparkConf
logger.conf.level = error
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = error
"""
STOP_TIMEOUT = 30.0  # seconds the JVM and its Python workers get to exit on close() before they are killed


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isalnum()


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (Linux); {} where there is no /proc."""
    tree: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return tree
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (its children, theirs, ...), Linux only ([] elsewhere)."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def pid_alive(pid: int) -> bool:
    """Running (a zombie has exited: only its parent's reaping is left)."""
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat[stat.rfind(")") + 2:][:1] != "Z"


def _wait_gone(pids: Iterable[int], timeout: float) -> None:
    """Wait (at most ``timeout``) for processes that are not our children to exit; SIGKILL what is left."""
    left = [pid for pid in pids if pid_alive(pid)]
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if pid_alive(pid)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class SparkEngine:
    """The audit engine over Spark: see the module's docstring. ``conf``: more Spark settings (they win over
    the engine's, e.g. ``spark.driver.host`` for a cluster whose executors must reach this driver);
    ``min_partitions``: the least number of splits a file is read in (Spark's default: the cores of local[N])."""

    name = "spark"

    def __init__(self, master: str = "local[2]", app_name: str = "retry-harness-audit", *,
                 conf: dict[str, str] | None = None, min_partitions: int | None = None) -> None:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession

        if SparkContext._gateway is not None or SparkContext._active_spark_context is not None:
            raise HarnessError("a Spark JVM is already running in this process: one SparkEngine at a time, "
                               "and none beside another SparkContext")
        self.master = master
        self.min_partitions = min_partitions
        self._closed = False
        self._lines: Any = None
        self._spans: list[tuple[int, int, str | None]] = []  # (first line, lines, local path or None) a file
        self._features: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="retry-harness-spark-")
        self.tmpdir = Path(self._tmp.name)
        local = _is_local(master)
        log4j = self.tmpdir / "log4j2.properties"
        log4j.write_text(_LOG4J2)
        (self.tmpdir / "java").mkdir()
        java_options = (f"-Dlog4j.configurationFile={log4j.as_uri()} -Djava.io.tmpdir={self.tmpdir / 'java'} "
                        "-XX:-UsePerfData")  # no /tmp/hsperfdata_<user>/<pid> file
        settings = {
            "spark.master": master,
            "spark.app.name": app_name,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.warehouse.dir": str(self.tmpdir / "warehouse"),
            "spark.local.dir": str(self.tmpdir / "local"),
            "spark.driver.extraJavaOptions": java_options,
        }
        if local:
            settings.update({
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.sql.shuffle.partitions": "4",
            })
        settings.update(conf or {})
        spark_conf = SparkConf(loadDefaults=False)
        for key, value in settings.items():
            spark_conf.set(key, value)
        try:
            # local: the Python workers run this interpreter (SparkContext reads PYSPARK_PYTHON; on a cluster,
            # the executors' Python is PYSPARK_PYTHON as set here, else python3)
            with _environment({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable} if local else {}):
                # the JVM's stdout (and so its Python workers') goes to stderr: stdout is the audit's output
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": 2})
                self._proc = gateway.proc
                context = SparkContext(conf=spark_conf, gateway=gateway)
            context.setLogLevel("WARN")
            if local:
                context.setCheckpointDir(str(self.tmpdir / "checkpoint"))
            self.spark = SparkSession(context)
        except BaseException:
            self.close()
            raise

    # -- the AuditEngine interface

    def load(self, paths: list[str] | str) -> list[tuple[str, int]]:
        """Register the view ``lines`` (see the module's docstring); the files with their line counts, in order."""
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        files = self._files([paths] if isinstance(paths, str) else list(paths))
        context = self.spark.sparkContext
        rdds = [context.textFile(spark_path, self.min_partitions) for _, spark_path in files]
        per_file = [rdd.getNumPartitions() for rdd in rdds]
        whole = rdds[0] if len(rdds) == 1 else context.union(rdds)  # partitions in file order, then split order
        counts = whole.mapPartitions(_count).collect()
        offsets, total = [], 0
        for count in counts:
            offsets.append(total)
            total += count
        numbered = whole.mapPartitionsWithIndex(lambda index, texts: _number(offsets[index], texts))
        schema = StructType([StructField("line", LongType(), False), StructField("text", StringType(), True)])
        self._lines = self.spark.createDataFrame(numbered, schema, verifySchema=False)
        self._lines.createOrReplaceTempView("lines")
        result, first = [], 0
        for (name, _), parts in zip(files, per_file, strict=True):
            result.append((name, sum(counts[first:first + parts])))
            first += parts
        # the driver reads a local file again (lines_at); one given by URI only through Spark
        self._spans = spans([(name if spark_path.startswith("file://") else None, lines)
                             for (name, spark_path), (_, lines) in zip(files, result, strict=True)])
        return result

    def features(self) -> None:
        """The view ``features``: triage.FEATURES_SQL over ``lines``, run by DuckDB in the executors; cached,
        as the triage queries read it more than once."""
        from pyspark import StorageLevel

        from harness.audit import triage

        if self._lines is None:
            raise HarnessError("SparkEngine.features() before load()")
        if self._features is not None:
            self._features.unpersist()
        self._features = self._lines.mapInArrow(triage.features_of_batch, triage.FEATURES_DDL)
        self._features.persist(StorageLevel.MEMORY_AND_DISK)
        self._features.createOrReplaceTempView("features")

    def register(self, name: str, column: str, values: list[str]) -> None:
        """A one-column temporary view ``name(column STRING)`` of ``values``."""
        from pyspark.sql.types import StringType, StructField, StructType

        schema = StructType([StructField(column, StringType(), True)])
        self.spark.createDataFrame([(value,) for value in values], schema).createOrReplaceTempView(name)

    def query(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """The rows of ``sql`` (Spark SQL) as tuples, streamed a partition at a time, in its ORDER BY order."""
        for row in self.spark.sql(sql).toLocalIterator():
            yield tuple(row)

    def materialize(self, name: str, sql: str) -> None:
        """The temporary view ``name`` of ``sql``'s rows, cached (the triage reads it more than once)."""
        from pyspark import StorageLevel

        frame = self.spark.sql(sql)
        frame.persist(StorageLevel.MEMORY_AND_DISK)
        frame.createOrReplaceTempView(name)

    def lines_at(self, sql: str) -> Iterator[tuple[int, str]]:
        """The lines (number, text) whose numbers ``sql`` gives, in order: from ``lines``, read by the executors."""
        with contextlib.closing(FileLines(self._spans)) as files:
            for line, text in self.query(f"SELECT l.line, l.text FROM lines l JOIN ({sql}) w ON l.line = w.line "
                                         f"ORDER BY l.line"):
                # U+FFFD: perhaps a byte Hadoop could not decode; the rules name it from the file's own line
                yield line, files.line(line, text) if text and "\ufffd" in text else text or ""

    def close(self) -> None:
        """Stop the session, the JVM and its Python workers; remove the temporary folder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        from pyspark import SparkContext

        proc, self._proc = self._proc, None
        below = descendants(proc.pid) if proc is not None else []  # the Python workers' daemon, ...
        try:
            spark = getattr(self, "spark", None)
            if spark is not None:
                with contextlib.suppress(Exception):
                    spark.stop()
        finally:
            gateway = SparkContext._gateway
            SparkContext._gateway = None
            SparkContext._jvm = None
            if gateway is not None:
                with contextlib.suppress(Exception):
                    gateway.shutdown()
            if proc is not None:
                _stop_jvm(proc)
            _wait_gone(below, STOP_TIMEOUT)
            self._tmp.cleanup()

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- the files

    def _files(self, paths: list[str]) -> list[tuple[str, str]]:
        """(name as given or listed, path for Spark) of every file, each pattern's matches in name order."""
        if not paths:
            raise EvidenceError("no file to audit")
        files: list[tuple[str, str]] = []
        for pattern in paths:
            matches = self._remote(pattern) if _has_scheme(pattern) else _local(pattern)
            files.extend(match for match in matches if match not in files)
        return files

    def _remote(self, pattern: str) -> list[tuple[str, str]]:
        """A URI (hdfs://, s3a://, file://...): the files Hadoop's file system lists for it, by name."""
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        path = jvm.org.apache.hadoop.fs.Path(pattern)
        system = path.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        statuses = system.globStatus(path)
        names = sorted(str(status.getPath().toString()) for status in (statuses or []) if status.isFile())
        if not names:
            raise EvidenceError(f"no file matches {pattern}")
        return [(name, _hadoop_escape(name)) for name in names]


def _local(pattern: str) -> list[tuple[str, str]]:
    """A local path or glob (the embedded engine's matching), each file with its absolute file: URI for Spark."""
    names = matching(pattern)
    if names is not None:
        if not names:
            raise EvidenceError(f"no file matches {pattern}")
    else:
        if os.path.isdir(pattern):
            raise EvidenceError(f"{pattern} is a folder; give the log files (e.g. {pattern}/*.ndjson)")
        if not os.path.isfile(pattern):
            raise EvidenceError(f"cannot read {pattern}: no such file")
        names = [pattern]
    out = []
    for name in names:
        if "," in name:  # textFile reads a comma-separated list of paths
            raise EvidenceError(f"cannot read {name} with Spark: a comma in a file name")
        out.append((name, "file://" + _hadoop_escape(os.path.abspath(name))))
    return out


def _hadoop_escape(path: str) -> str:
    """A file name for ``textFile``, which expands glob characters in it: those escaped."""
    return "".join("\\" + char if char in _HADOOP_GLOB else char for char in path)


def _count(texts: Iterable[str]) -> Iterator[int]:
    yield sum(1 for _ in texts)


def _number(offset: int, texts: Iterable[str]) -> Iterator[tuple[int, str | None]]:
    for number, text in enumerate(texts, offset + 1):
        yield number, text or None


def _stop_jvm(proc: subprocess.Popen[bytes]) -> None:
    """The gateway's JVM exits when its stdin closes (pyspark's design); killed if it has not in STOP_TIMEOUT."""
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` while the JVM starts (it copies this process's environment)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
