"""The progress line of long work (exploration): items done, failures so far, rate, time left.

Drawn with rich on a terminal's stderr only: in CI logs, pipes and under ``-q`` it stays quiet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

ProgressUpdate = Callable[[int, int], None]  # (items done, failures so far)


@contextlib.contextmanager
def progress_line(label: str, total: int | None, *, quiet: bool = False) -> Iterator[ProgressUpdate]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    shown = not quiet and console.is_terminal
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("failures {task.fields[failures]}"),
                        TextColumn("{task.fields[rate]:.1f}/s"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=console, disable=not shown, transient=True)
    with progress:
        task = progress.add_task(label, total=total, failures=0, rate=0.0)

        def update(done: int, failures: int) -> None:
            elapsed = progress.tasks[0].elapsed or 0.0
            progress.update(task, completed=done, failures=failures, rate=done / elapsed if elapsed else 0.0)

        yield update
