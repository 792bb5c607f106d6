"""NDJSON, one JSON value a line: the one line loop every reader of a log or a journal uses.

Line numbers are 1-based and count blank lines, so a message names the line an editor shows.

Limits, applied to every line before a decoder sees it (``limit_error``), so that a hostile line is a
malformed line naming its number instead of a RecursionError, a slow int conversion or a text that
cannot be hashed: nesting deeper than ``MAX_DEPTH`` levels, an integer of more than ``MAX_INT_DIGITS``
digits, and a lone UTF-16 surrogate escape (``"\\ud800"``: valid JSON, but no Unicode text, so no UTF-8
byte string to hash or write back; orjson rejects it too).

Bytes that are not UTF-8 make a line malformed too, never text with U+FFFD in it: every reader opens a
log with ``open_text`` (``surrogateescape``: each bad byte becomes one lone surrogate character), and
``limit_error`` names the first bad byte. So ``check``, ``audit`` and ``verify`` judge such a line alike.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO


def json_document(value: Any) -> bytes:
    """``value`` as an indented JSON document ending in a newline (verdict.json, ``check --format json``); what
    JSON cannot hold is written as its ``str``.

    orjson writes a 100,000-operation verdict (800 MB) in a fraction of the stdlib's time (whose indenting encoder
    is pure Python) and in one buffer, not a list of tens of millions of chunks. A value orjson refuses (an
    integer beyond 64 bits, a lone surrogate from a log byte that is not UTF-8) goes through ``json`` instead,
    non-ASCII escaped."""
    import orjson  # here: the proxy's own environment reads journals with this module, and has no orjson

    try:
        return orjson.dumps(value, default=str,
                            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(value, indent=2, default=str) + "\n").encode("utf-8")


class Items:
    """A JSON array whose items are made one at a time as ``write_json_file`` writes it (``make`` of each of
    ``sources``), in a top-level object: a 100,000-operation verdict's document is 800 MB, and the dicts it is
    written from as much again, where one operation's are a few kilobytes."""

    def __init__(self, sources: Iterable[Any], make: Callable[[Any], Any]) -> None:
        self.sources, self.make = sources, make

    def made(self) -> list[Any]:
        return [self.make(source) for source in self.sources]


def _document_parts(value: dict[str, Any]) -> Iterator[bytes]:
    """``json_document(value)``'s bytes, ``value``'s ``Items`` made and written one item at a time: each part is
    orjson's, its lines indented as deep as it sits (a JSON string holds no line break, so each of orjson's is
    one of its layout)."""
    import orjson

    option = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS

    def indented(part: Any, depth: int) -> bytes:
        return orjson.dumps(part, default=str, option=option).replace(b"\n", b"\n" + b"  " * depth)

    if not value:
        yield b"{}\n"
        return
    for number, (key, member) in enumerate(value.items()):
        yield (b"{\n  " if number == 0 else b",\n  ") + orjson.dumps(key) + b": "
        if not isinstance(member, Items):
            yield indented(member, 1)
            continue
        empty = True
        for source in member.sources:
            yield (b"[\n    " if empty else b",\n    ") + indented(member.make(source), 2)
            empty = False
        yield b"[]" if empty else b"\n  ]"
    yield b"\n}\n"


def write_json_file(path: Path, value: Any) -> None:
    """``value`` as ``json_document`` into ``path``, whole or not at all (``harness.safe_files.write_file``: a new
    file of an unpredictable name renamed over it, so a reader, or a run killed meanwhile, never sees half a
    context.json or verdict.json, and nothing the agent left at the name is written through). A top-level
    object's ``Items`` are written as arrays, an item at a time."""
    from harness.safe_files import write_file

    streamed = isinstance(value, dict) and any(isinstance(member, Items) for member in value.values())
    if streamed and all(type(key) is str for key in value):
        import orjson

        try:
            write_file(path, _document_parts(value))
            return
        except (TypeError, orjson.JSONEncodeError):  # what orjson refuses: the whole document through json
            pass
    # a key that is not a string is written as orjson writes it, which only the whole document says
    write_file(path, json_document(_made(value) if streamed else value))


def _made(value: dict[Any, Any]) -> dict[Any, Any]:
    return {key: member.made() if isinstance(member, Items) else member for key, member in value.items()}


class NdjsonError(ValueError):
    """Raised by :func:`read_objects` when a line is not a JSON object; the message names file and line."""


def numbered_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text without its line break)`` of each line that is not blank."""
    for number, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if text.strip():
            yield number, text


MAX_DEPTH = 64
MAX_INT_DIGITS = 400  # beyond a double's range, so orjson (the audit's fast path) rejects these too
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')  # a JSON string, also one cut short by the line's end
_BRACKET = re.compile(r"[\[\]{}]")
# an integer part: not the digits of a fraction or an exponent, which are harmless
_LONG_INT = re.compile(r"(?:^|[^.\deE+\-])-?\d{" + str(MAX_INT_DIGITS + 1) + "}")
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]", re.ASCII)
_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte ``surrogateescape`` could not decode


def open_text(path: str | os.PathLike[str]) -> TextIO:
    """A log opened for reading lines, its bad bytes kept (as lone surrogates) for ``limit_error`` to name."""
    return open(path, encoding="utf-8", errors="surrogateescape")


def limit_error(text: str | bytes) -> str | None:
    """Why a line is beyond the limits (see the module's docstring), or None.

    Cheap on an ordinary line: a count of brackets and a scan for long digit runs and surrogate escapes,
    in C; the strings are stripped (so a bracket or digits inside one do not count) only when one hits."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 text (byte 0x{text[exc.start]:02x} at byte {exc.start + 1})"
    elif not text.isascii():  # O(1): the common line never pays for the search
        bad = _UNDECODED.search(text)
        if bad is not None:
            offset = len(text[:bad.start()].encode("utf-8", "surrogateescape"))
            return f"not UTF-8 text (byte 0x{ord(bad.group()) - 0xDC00:02x} at byte {offset + 1})"
    if text.count("[") + text.count("{") > MAX_DEPTH:
        depth = 0
        for bracket in _BRACKET.findall(_STRING.sub("", text)):
            depth += 1 if bracket in "[{" else -1
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
    if _LONG_INT.search(text) and _LONG_INT.search(_STRING.sub('""', text)):
        return f"an integer of more than {MAX_INT_DIGITS} digits"
    if _SURROGATE.search(text):
        try:
            json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate escape (\\ud800-\\udfff): not Unicode text"
        except (ValueError, RecursionError):
            pass  # not JSON: the decoder says why
    return None


def _json_decoder() -> Callable[[str | bytes], Any]:
    """msgspec's decoding where it is installed (the harness's): a third of ``json.loads``'s memory on a journal,
    whose keys it makes once, not once a line. The proxy's own environment reads journals with this module too,
    and may not have it."""
    try:
        import msgspec
    except ImportError:
        return json.loads
    return msgspec.json.Decoder().decode


_DECODE = _json_decoder()


def decode(text: str | bytes) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, why)`` when the text is not JSON or beyond the limits.

    What msgspec refuses goes to ``json.loads``, which decodes what JSON's standard does not hold as the
    standard library always has (NaN, a number beyond a double, a lone surrogate) and says why in its words."""
    beyond = limit_error(text)
    if beyond is not None:
        return None, beyond
    try:
        return _DECODE(text), None
    except ValueError:
        pass
    try:
        return json.loads(text), None
    except ValueError as exc:
        where = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"not JSON ({getattr(exc, 'msg', exc)}{where})"


def share_strings(value: Any, strings: dict[str, str]) -> Any:
    """``value`` (decoded JSON), each string in it (not its keys) replaced by the equal one ``strings`` already
    holds, else added to it. A run's evidence repeats its ids, keys, fingerprints, routes and states from line to
    line and from file to file: one object per distinct text holds them in a fraction of the memory."""
    slots = value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    for slot, item in slots:  # a dict's keys are only reassigned, never added, while it is walked
        kind = type(item)
        if kind is str:
            value[slot] = strings.setdefault(item, item)
        elif kind is dict or kind is list:
            share_strings(item, strings)
    return value


def read_objects(path: str | os.PathLike[str], *, what: str,
                 strings: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every line of a file the harness wrote, as a dict with ``_line``; a missing file is empty.

    ``what`` names the file in an error ("proxy journal"): the harness wrote it, so a bad
    line means a run that did not finish writing it, and the error says where. ``strings``: shared with the
    rest of what is read (``share_strings``).
    """
    from harness.safe_files import HARNESS_FILE_BYTES, open_regular_text

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return []
    records = []
    # a file the harness wrote: a regular file within its bound, or an UnsafeFile saying what stands there
    with open_regular_text(path, HARNESS_FILE_BYTES, what=f"{path} ({what})") as handle:
        for number, text in numbered_lines(handle):
            value, error = decode(text)
            if error is None and not isinstance(value, dict):
                error = f"expected a JSON object, got {type(value).__name__}"
            if error is not None:
                raise NdjsonError(f"{path}:{number}: {error} ({what})")
            value["_line"] = number
            records.append(value if strings is None else share_strings(value, strings))
    return records
