"""Colours in the CLI's terminal output: verdicts (PASS / FAIL / INCOMPLETE), FAIL lines, the matrix's cells.

The renderers (harness/report.py) return plain text; a :class:`Paint` adds ANSI colour around words of
it, nothing else, so the text without colour is exactly the plain text (tests compare it, files get
it). Whether to colour follows the usual conventions, in this order:

- ``NO_COLOR`` set and not empty (https://no-color.org): no colour;
- ``FORCE_COLOR`` set and not empty (https://force-color.org): colour, even into a pipe;
- else colour only when the stream is a terminal (``isatty``) and ``TERM`` is not ``dumb``.

Only what the CLI prints goes through here: verdict.txt, Markdown, HTML and JSON never carry a colour.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TextIO

# SGR codes by role: what a word says, not how it looks
STYLES: dict[str, str] = {
    "pass": "32",  # green
    "fail": "31",  # red
    "incomplete": "33",  # yellow
    "alarm": "1;31",  # bold red: a miss or a false alarm of the matrix, a cell that never ran
    "dim": "2",
}
# the matrix's symbols and verdicts (harness.results.matrix.Cell.verdict) by role
VERDICT_ROLES: dict[str, str] = {"ok": "pass", "caught": "pass", "fail": "fail", "missed": "alarm",
                                 "false-alarm": "alarm"}


def colour_wanted(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether text written to ``stream`` should carry colour (the conventions above)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False
    return tty and env.get("TERM") != "dumb"


class Paint:
    """``paint(text, role)``: ``text`` in the role's colour when enabled, ``text`` itself otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, role: str) -> str:
        if not self.enabled or not text or role not in STYLES:
            return text
        return f"\x1b[{STYLES[role]}m{text}\x1b[0m"

    def verdict(self, text: str, verdict: str) -> str:
        """A matrix cell's symbol or outcome in the colour of its verdict."""
        return self(text, VERDICT_ROLES.get(verdict, ""))

    def lines(self, text: str) -> str:
        """The verdict words of a rendered report (run, check, audit, explore): headlines' PASS / FAIL /
        INCOMPLETE, ``verdict: PASSED / FAILED``, and each FAIL / FLAKY / INCOMPLETE line's leading word."""
        if not self.enabled:
            return text
        return "".join(self._line(line) for line in text.splitlines(keepends=True))

    def _line(self, line: str) -> str:
        match = _HEADLINE.match(line)
        if match:
            word = match.group(2)
            return match.group(1) + self(word, _WORD_ROLES[word]) + match.group(3)
        match = _LEADING.match(line)
        if match:
            word = match.group(2)
            return match.group(1) + self(word, _WORD_ROLES[word]) + line[match.end(2):]
        return line


PLAIN = Paint(False)

_WORD_ROLES = {"PASS": "pass", "PASSED": "pass", "FAIL": "fail", "FAILED": "fail", "INCOMPLETE": "incomplete",
               "FLAKY": "incomplete", "ALSO FAILED": "fail"}
# `scenario X with agent 'a': FAIL` (render_headline), optionally followed by more on the line
_HEADLINE = re.compile(r"^(scenario \S+ with agent .*?: )(PASS|FAIL|INCOMPLETE)(\b.*\n?)$", re.DOTALL)
# `verdict: FAILED (...)`, `  FAIL H015 ...`, `INCOMPLETE: ...`, `FLAKY ...`, `PASS: no schedule ...`
_LEADING = re.compile(r"^(verdict: |expectations: |\s*)(PASSED|FAILED|ALSO FAILED|FAIL|FLAKY|INCOMPLETE|PASS)"
                      r"(?=[\s:(]|$)")


def paint_for(stream: TextIO) -> Paint:
    """The paint for text written to ``stream``."""
    return Paint(colour_wanted(stream))
