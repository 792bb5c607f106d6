"""How the checker reads a record's fields, whatever its source: a timestamp as unix seconds, a path without its
query, whether a planned crash fell between two times. Every module of the checker and the reports read them here.
"""

from __future__ import annotations

from typing import Any

from harness.events import timestamp_seconds


def ts_value(ts: Any) -> float:
    """Unix seconds from a float or an RFC 3339 string (unparseable -> 0.0, ordering then falls back to lines)."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        return timestamp_seconds(ts) or 0.0
    return 0.0


def bare_path(path: Any) -> str | None:
    return path.split("?", 1)[0] if isinstance(path, str) else None


def crashed_between(start: Any, end: Any, crashes: tuple[float, ...]) -> bool:
    """A planned crash (``crashes``, wall clock) fell between ``start`` and ``end`` (floats or RFC 3339);
    False when either is unknown."""
    if start is None or end is None or not ts_value(end):
        return False
    return any(ts_value(start) <= crash <= ts_value(end) for crash in crashes)
