"""Text from the evidence made visible before a person reads it, in a terminal or a browser: every character a
terminal acts on, or a page draws out of order or not at all, shown as its escape (``\\x1b``, ``\\u202e``)."""

from __future__ import annotations

import re

# C0 but the line break and tab, DEL, C1 (ESC's 8-bit CSI among them), the bidirectional marks, overrides and
# isolates (text shown in another order than it is), the Unicode line separators, and the zero-width characters
# (two ids that differ by one look the same)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060"
                      "\u2066-\u2069\ufeff]")
_CONTROL_OR_BREAK = re.compile(_CONTROL.pattern[:-1] + "\n\t]")
_CONTROL_BUT_NUL = re.compile("[\x01" + _CONTROL.pattern[2:])


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = True) -> str:
    """``text`` with every control character that came from evidence shown as its escape (``\\x1b``), never
    sent raw to a terminal: an agent's log field holding ESC sequences or a carriage return could otherwise
    draw a fake ``verdict: PASSED`` line over the real one. ``lines``: the text's own line breaks kept (a whole
    report); else they are escaped too (one field, which must stay on its line)."""
    return (_CONTROL if lines else _CONTROL_OR_BREAK).sub(_escaped, text)


def printable_but_nul(text: str) -> str:
    """``printable`` leaving NUL alone: for texts joined by NUL to be escaped in one call (``html_report``)."""
    return _CONTROL_BUT_NUL.sub(_escaped, text)
