"""STAND-IN for the lead's ``harness/audit/triage.py`` (design19.md): only so the Spark engine can be built and
tested in its own branch. The lead's real module replaces this file whole; it keeps these three names
(``FEATURES_SQL``, ``FEATURES_DDL``, ``features_of_batch``) with the same meaning, so the engine needs no change.

``FEATURES_SQL``: DuckDB SQL over a relation ``lines(line BIGINT, text VARCHAR)``. ``features_of_batch`` runs it
inside a Spark executor (``DataFrame.mapInArrow``) over each Arrow batch of lines, with DuckDB, so the same
SQL gives the same features on both engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import duckdb
import pyarrow as pa

FEATURES_SQL = "SELECT line, text, length(text) AS size FROM lines"
FEATURES_DDL = "line BIGINT, text STRING, size BIGINT"
FEATURES_SCHEMA = pa.schema([("line", pa.int64()), ("text", pa.string()), ("size", pa.int64())])


def features_of_batch(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: Arrow batches of ``lines`` in, batches of FEATURES_SQL's rows out
    (``FEATURES_SCHEMA``), one DuckDB connection for the whole partition."""
    con = duckdb.connect()
    try:
        for batch in batches:
            con.register("lines", pa.Table.from_batches([batch]))
            for out in con.sql(FEATURES_SQL).to_arrow_reader():  # DuckDB 2: a relation's reader, no copy
                yield out.cast(FEATURES_SCHEMA)
            con.unregister("lines")
    finally:
        con.close()
