"""The progress line of long work (exploration, the matrix, a large audit): items done, failures so far,
rate, time left.

Drawn with rich on stderr, and only when stderr really is a terminal: in CI logs, pipes, under ``-q``,
with ``TERM=dumb`` or ``CI`` set it stays quiet. (``FORCE_COLOR`` makes rich treat any stream as a
terminal; it asks for colours, not for a live display in a log, so the test here is ``isatty`` itself.)
The line is transient: it is gone when the work ends, and whatever else is printed meanwhile goes above it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

ProgressUpdate = Callable[[int, int], None]  # (items done, failures so far); bytes done for unit="bytes"
UNITS = ("items", "bytes")


def progress_wanted(stream: TextIO | None = None, *, quiet: bool = False) -> bool:
    """Whether a live progress line belongs on ``stream`` (default: stderr)."""
    stream = sys.stderr if stream is None else stream
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _noop(done: int, failures: int) -> None:
    return None


@contextlib.contextmanager
def progress_line(label: str, total: int | None, *, quiet: bool = False, unit: str = "items",
                  failures: str = "failures") -> Iterator[ProgressUpdate]:
    """A context whose value is ``update(done, failures)``. ``unit="bytes"``: ``done`` and ``total`` are
    bytes (shown as MB, the rate as MB/s); ``failures`` names the count (e.g. "unhealthy")."""
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} is not known; valid: {', '.join(UNITS)}")
    if not progress_wanted(quiet=quiet):
        yield _noop  # rich is not even imported: nothing can reach a log
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    console = Console(stderr=True, force_terminal=True)
    count: ProgressColumn
    rate: ProgressColumn
    if unit == "bytes":
        count, rate = DownloadColumn(), TransferSpeedColumn()
    else:
        count, rate = MofNCompleteColumn(), TextColumn("{task.fields[rate]:.1f}/s")
    # stdout goes above the line only when it is the terminal too; redirected, it must stay where it was sent
    shown_stdout = progress_wanted(sys.stdout)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), count,
                        TextColumn(f"{failures} {{task.fields[failures]}}"), rate, TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console, transient=True, redirect_stdout=shown_stdout)
    with progress:
        task = progress.add_task(label, total=total, failures=0, rate=0.0)

        def update(done: int, failed: int) -> None:
            elapsed = progress.tasks[0].elapsed or 0.0
            progress.update(task, completed=done, failures=failed, rate=done / elapsed if elapsed else 0.0)

        yield update
