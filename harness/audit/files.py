"""The files an audit reads: what a path or a glob names, and their lines read again by number, numbered through
the files in name order (as the stream reads them). Every engine reads its input through these."""

from __future__ import annotations

import bisect
import glob
import os
from pathlib import Path
from typing import TextIO

from harness.errors import EvidenceError
from harness.ndjson import open_text


def matching(pattern: str) -> list[str] | None:
    """The local files a glob names, in name order (``**`` crossing folders); None when ``pattern`` is no glob,
    or is the name of a file itself (a file may be called ``a[1].ndjson``: it is read, not matched)."""
    if not glob.has_magic(pattern) or os.path.isfile(pattern):
        return None
    return sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))


def expand(pattern: str | Path) -> list[str]:
    """The files a path or a glob names, in name order; an error names the pattern when there is none."""
    text = str(pattern)
    files = matching(text)
    if files is not None:
        if not files:
            raise EvidenceError(f"{text}: no file matches this pattern")
        return files
    path = Path(text)
    if path.is_dir():
        raise EvidenceError(f"{path} is a folder; give the audit log file, or a glob such as {path / '*.ndjson'}")
    if not path.exists():
        raise EvidenceError(f"cannot read {path}: No such file or directory")
    return [text]


class FileLines:
    """Lines of local files read again by their numbers through the files, as the stream reads them
    (``open_text``: bad bytes kept). ``spans``: (first line, lines, path or None: a file this process cannot
    read) a file, in order. The numbers asked for only grow, so each file is read once, forward."""

    def __init__(self, spans: list[tuple[int, int, str | None]]) -> None:
        self.spans = spans
        self.firsts = [first for first, _, _ in spans]
        self.handle: TextIO | None = None
        self.path: str | None = None
        self.at = 0  # the number of the line last read from ``handle``

    def line(self, number: int, text: str = "") -> str:
        """Line ``number``'s text in its file; ``text`` (what another reader made of it) where there is none."""
        index = bisect.bisect_right(self.firsts, number) - 1
        if index < 0:
            return text
        first, lines, path = self.spans[index]
        if path is None or number >= first + lines:
            return text
        if path != self.path or number <= self.at:
            self.close()
            self.handle, self.path, self.at = open_text(path), path, first - 1
        assert self.handle is not None
        for read in self.handle:
            self.at += 1
            if self.at == number:
                return read.rstrip("\r\n")
        return text  # the file is shorter than when it was counted

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.handle, self.path = None, None


def spans(files: list[tuple[str | None, int]]) -> list[tuple[int, int, str | None]]:
    """(first line, lines, path) of each (path, lines) in turn, for ``FileLines``: lines are numbered through
    the files."""
    out: list[tuple[int, int, str | None]] = []
    number = 1
    for path, lines in files:
        out.append((number, lines, path))
        number += lines
    return out
