"""Lines the harness says to the person at the terminal while it works (the fault proxy's runtime being made,
a signal received), outside any report: to stderr, or where a front end that captures stderr sends them
(the pytest plugin: past its capture, so the first run is not 20 s of silence)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable


def _to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


_WRITER: list[Callable[[str], None]] = [_to_stderr]


def say(text: str) -> None:
    """One notice (a line, ending in a newline); never an error of its own."""
    with contextlib.suppress(Exception):
        _WRITER[0](text)


def set_writer(writer: Callable[[str], None]) -> None:
    _WRITER[0] = writer
