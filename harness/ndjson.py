"""NDJSON, one JSON value a line: the one line loop every reader of a log or a journal uses.

Line numbers are 1-based and count blank lines, so a message names the line an editor shows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class NdjsonError(ValueError):
    """Raised by :func:`read_objects` when a line is not a JSON object; the message names file and line."""


def numbered_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text without its line break)`` of each line that is not blank."""
    for number, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if text.strip():
            yield number, text


def decode(text: str | bytes) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, why)`` when the text is not JSON."""
    try:
        return json.loads(text), None
    except ValueError as exc:
        where = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"not JSON ({getattr(exc, 'msg', exc)}{where})"


def read_objects(path: str | os.PathLike[str], *, what: str) -> list[dict[str, Any]]:
    """Every line of a file the harness wrote, as a dict with ``_line``; a missing file is empty.

    ``what`` names the file in an error ("proxy journal"): the harness wrote it, so a bad
    line means a run that did not finish writing it, and the error says where.
    """
    path = Path(path)
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, text in numbered_lines(handle):
            value, error = decode(text)
            if error is None and not isinstance(value, dict):
                error = f"expected a JSON object, got {type(value).__name__}"
            if error is not None:
                raise NdjsonError(f"{path}:{number}: {error} ({what})")
            value["_line"] = number
            records.append(value)
    return records
