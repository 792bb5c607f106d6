"""Where the audit runs: an engine reads the log into SQL and triages it (``harness.audit.triage``); the rules
(``harness.checker``, through the ``StreamingAudit``) judge what SQL cannot, in this process.

``DuckDBEngine`` (the default, embedded) and ``harness.audit.spark_engine.SparkEngine`` (a Spark cluster, or
``local[2]``) give the same output for the same input: ``audit_with`` below drives both alike. The output lists
the operations in the order of their first line.

An engine: ``load(paths)`` registers ``lines(line, text)`` (numbered through the files, in name order) and
returns ``(file, lines)`` per file; ``features()`` materialises ``features``; ``register(name, column, values)``
a one-column table; ``materialize(name, sql)`` a table from a query; ``query(sql)`` streams rows in order;
``lines_at(sql)`` the lines (number, text) whose numbers a query gives; ``close()`` frees everything.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from harness.audit import triage
from harness.audit.files import FileLines, spans
from harness.audit.lines import read_line
from harness.audit.stream import StreamingAudit
from harness.checker import Finding, OperationContext
from harness.errors import EvidenceError
from harness.limits import collector_paused

ENGINES = ("typed", "duckdb", "spark", "stream")  # typed: harness.audit.typed


class EngineUnsuitable(Exception):
    """The embedded engine cannot read this file exactly as the audit reads lines (a carriage return, a
    byte-order mark, bytes that are not UTF-8): the audit streams it instead."""


class AuditEngine(Protocol):
    name: str

    def load(self, paths: list[str]) -> list[tuple[str, int]]: ...

    def features(self) -> None: ...

    def register(self, name: str, column: str, values: list[str]) -> None: ...

    def materialize(self, name: str, sql: str) -> None: ...

    def query(self, sql: str) -> Iterator[tuple[Any, ...]]: ...

    def lines_at(self, sql: str) -> Iterator[tuple[int, str]]: ...

    def close(self) -> None: ...


def prescan(path: str) -> int:
    """The number of lines of the file as Python's text mode counts them; ``EngineUnsuitable`` when DuckDB's CSV
    reader would split or strip them otherwise (a carriage return anywhere, a byte-order mark)."""
    lines = 0
    last = b"\n"
    try:
        with open(path, "rb") as handle:
            first = True
            while block := handle.read(8 << 20):
                if first and block.startswith(b"\xef\xbb\xbf"):
                    raise EngineUnsuitable(f"{path} starts with a byte-order mark")
                first = False
                if b"\r" in block:
                    raise EngineUnsuitable(f"{path} holds a carriage return")
                lines += block.count(b"\n")
                last = block[-1:]
    except OSError as exc:
        raise EvidenceError(f"cannot read {path}: {exc.strerror or exc}") from None
    return lines + (last != b"\n")


class DuckDBEngine:
    """The embedded engine: DuckDB in this process, reading the files in parallel, its spill files in a
    temporary folder removed on close. It keeps no line's text: the few lines the rules read are read again
    from the files (``lines_at``)."""

    name = "duckdb"

    def __init__(self, *, threads: int | None = None, memory_limit: str | None = None) -> None:
        """``memory_limit``: DuckDB's (its default: 80% of the machine's memory). Below what the triage needs it
        spills to its temporary folder, and slows: on a 1,000,000-line log, 21 s at 1 GB against 10 s unbounded
        (about 2.4 GB resident)."""
        import duckdb

        self._scratch = tempfile.TemporaryDirectory(prefix="retry-harness-duckdb-")
        config: dict[str, str | bool | int | float | list[str]] = {
            "threads": threads or max(1, os.cpu_count() or 1), "temp_directory": self._scratch.name,
            "preserve_insertion_order": True}
        if memory_limit is not None:
            config["memory_limit"] = memory_limit
        self.connection = duckdb.connect(config=config)
        self.connection.execute("SET enable_progress_bar = false")  # stdout is the audit's output
        triage.prepare(self.connection)
        self.spans: list[tuple[int, int, str | None]] = []

    def load(self, paths: list[str]) -> list[tuple[str, int]]:
        counts = [prescan(path) for path in paths]
        self.spans, self.total = spans(list(zip(paths, counts, strict=True))), sum(counts)
        files = "[" + ", ".join(triage.quote(p) for p in paths) + "]"
        # one VARCHAR column, no quoting, no header: each line as it stands, in file order (read in parallel;
        # numbering rows in the read itself, row_number() OVER (), would make everything after it one thread)
        self._read = (f"CREATE TABLE raw AS SELECT text FROM read_csv({files}, columns = {{'text': 'VARCHAR'}}, "
                      "delim = '\\0', quote = '', escape = '', header = false, auto_detect = false, "
                      "strict_mode = false, new_line = '\\n', max_line_size = 16777216, buffer_size = 33554432)")
        return list(zip(paths, counts, strict=True))

    def features(self) -> None:
        import duckdb

        try:
            self.connection.execute(self._read)
            self.connection.execute("CREATE VIEW lines AS SELECT rowid + 1 AS line, text FROM raw")
            self.connection.execute(f"CREATE TABLE features AS {triage.features_sql()}")
        except duckdb.Error as exc:  # not UTF-8, a line beyond the reader's size, ...
            raise EngineUnsuitable(str(exc).splitlines()[0]) from None
        rows = self.connection.execute("SELECT count(*) FROM raw").fetchone()
        self.connection.execute("DROP VIEW lines")
        self.connection.execute("DROP TABLE raw")  # the text is read again from the files where needed
        # from here every query that needs an order says it (ORDER BY): DuckDB may spill and reorder freely
        self.connection.execute("SET preserve_insertion_order = false")
        if rows is None or rows[0] != self.total:  # numbered otherwise than Python's text mode
            raise EngineUnsuitable(f"DuckDB read {rows and rows[0]} lines where Python reads {self.total}")

    def register(self, name: str, column: str, values: list[str]) -> None:
        self.connection.execute(f"CREATE OR REPLACE TABLE {name} ({column} VARCHAR)")
        if values:
            self.connection.executemany(f"INSERT INTO {name} VALUES (?)", [(v,) for v in values])

    def materialize(self, name: str, sql: str) -> None:
        import duckdb

        try:
            self.connection.execute(f"CREATE OR REPLACE TABLE {name} AS {sql}")
        except duckdb.OutOfMemoryException as exc:  # before any output: the stream, bounded by its window, can
            raise EngineUnsuitable(str(exc).splitlines()[0]) from None

    def query(self, sql: str) -> Iterator[tuple[Any, ...]]:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
            while rows := cursor.fetchmany(10_000):
                yield from rows
        finally:
            cursor.close()

    def lines_at(self, sql: str) -> Iterator[tuple[int, str]]:
        """The lines whose numbers ``sql`` gives (in order), read again from the files as the audit reads them."""
        with contextlib.closing(FileLines(self.spans)) as files:
            for (number, *_) in self.query(sql):
                yield number, files.line(number)

    def close(self) -> None:
        try:
            self.connection.close()
        finally:
            self._scratch.cleanup()


def open_engine(name: str, *, master: str | None = None) -> AuditEngine:
    if name == "duckdb":
        return DuckDBEngine()
    if name == "spark":
        from harness.audit.spark_engine import SparkEngine

        return SparkEngine(master=master or "local[2]")
    raise ValueError(f"engine {name!r} is not known; valid: {', '.join(ENGINES)}")


def forced_by(texts: Iterable[tuple[int, str]]) -> tuple[list[str], bool]:
    """What the lines SQL could not read for certain name, as the audit reads them: operation ids, keys,
    intents and referenced operations (all of which go through the rules), and whether one is a session
    approval (which covers every operation of its holder: then everything does)."""
    values: set[str] = set()
    session = False
    for _, text in texts:
        record, _ = read_line(text)
        if record is None:
            continue
        for name in ("operation_id", "idempotency_key", "intent_id", "supersedes_operation_id", "parent_operation_id",
                     "correction_of_operation_id", "correction_operation_id"):
            value = record.get(name)
            if isinstance(value, str):
                values.add(value)
        session = session or (record.get("event") == "approval" and record.get("scope") == "session")
    return sorted(values), session


def first_line(op: OperationContext) -> int:
    lines = [r.get("_line") or 0 for group in (op.operations, op.attempts, op.observations, op.resolutions,
                                               op.approvals, op.log_effects) for r in group]
    return min(lines) if lines else 0


@collector_paused()  # the rules' operations and the pieces kept for the merge are long-lived
def audit_with(engine: AuditEngine, paths: list[str], name: str, format: str, window: int,
               write: Callable[[str], None], progress: Callable[[int, int], None] | None = None,
               size: int = 0) -> tuple[dict[str, Any], list[Finding], list[tuple[str, int]]]:
    """Triage on the engine, the rest through the rules, the output in first-line order; returns the stats,
    the run-wide findings and the files read."""
    files = engine.load(paths)
    total = sum(n for _, n in files) or 1
    engine.features()
    if progress is not None:
        progress(size // 3, 0)
    loose = list(engine.lines_at(triage.LOOSE_SQL))
    forced, session = forced_by(loose)
    session = session or bool(next(iter(engine.query(triage.SESSION_APPROVALS_SQL)))[0])
    engine.register("forced", "value", forced)
    engine.materialize("clean", triage.TRIAGE_SQL + (" AND 1 = 0" if session else ""))
    judged: list[tuple[int, str]] = []
    audit = StreamingAudit(name, lambda op, piece: judged.append((first_line(op), piece)) if piece else None,
                           format=format, window=window)
    might_find = audit.run_rules.might_find
    for count, (line, text) in enumerate(engine.lines_at(triage.ROUTED_SQL)):
        if text.strip():  # as the streaming audit skips a blank line
            audit.feed(line, text, might_find(text))
        if progress is not None and count % 50_000 == 0:
            progress(size // 3 + int(size * 2 / 3 * line / total), audit.unhealthy)
    audit.finish()
    judged.sort(key=lambda item: item[0])
    clean_ops = clean_lines = 0
    if format == "json":
        clean = ((row[0], row[2], row[1]) for row in engine.query(triage.CLEAN_SQL))
        for _, piece, *lines in heapq.merge(((first, piece) for first, piece in judged), clean, key=lambda r: r[0]):
            write(piece)
            if lines:
                clean_ops += 1
                clean_lines += lines[0]
    else:
        for _, piece in judged:
            write(piece)
        clean_ops, clean_lines = next(iter(engine.query("SELECT COUNT(*), COALESCE(SUM(n_lines), 0) FROM clean")))
    if progress is not None:
        progress(size, audit.unhealthy)
    classes = dict(audit.classes)
    if clean_ops:
        classes["healthy"] = classes.get("healthy", 0) + int(clean_ops)
    stats = {"events": audit.events + int(clean_lines), "malformed": audit.malformed, "classes": classes,
             "unhealthy": audit.unhealthy, "findings": audit.finding_count}
    return stats, audit.run_findings, files
