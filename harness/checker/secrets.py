"""What rule H019 looks for in a log line: the planted canaries in any common reversible form, and the
patterns of a credential (an Authorization header, a bearer token, a cookie, a private key block).

A secret that can be recovered from the log is in the log. ``CanaryFinder`` is built once per run from the
planted values (``HARNESS_SECRET_<NAME>``) and searches each line for:

- **encoded forms, as needles** (precomputed, found by one substring search each): the value as written, in
  any case; base64, standard and URL-safe, padded or not, alone or inside a longer encoded string (the
  base64 of a value depends on its byte offset mod 3: each of the three alignments' stable inner part is a
  needle), in its own case; base32 (its five alignments) and hex, in any case; reversed; rot13;
- **escapes, by decoding the line** (only a line holding the escape's character is decoded): JSON and
  Python backslash escapes of the raw text (``\\u0068\\u0073...``, ``\\x68``, ``\\/``, up to three levels of
  escaping), percent-encoding (``%68%73...``, any part of the value), HTML entities (``&#104;``, ``&#x68;``);
  each decoded text is searched for every needle above, so a base64 form JSON-escaped is found too;
- **compressed data**: a base64 (or hex) token that starts as gzip or zlib data does (``H4sI``, ``eJw``...)
  is decompressed, at most ``MAX_COMPRESSED_TOKENS`` per line and ``MAX_INFLATED`` bytes each, and what it
  inflates to is searched for every needle. Raw deflate (no header) is not tried: nothing marks it.

Not searched: a value split by separators, partly encoded otherwise, encrypted, or hashed (not reversible).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import unquote

MIN_SECRET = 6  # a shorter planted value is not searched (it would match innocent text)
MIN_NEEDLE = 6  # an encoded form shorter than this is not searched either
MAX_COMPRESSED_TOKENS = 4  # per line and decoded text: the cost of a line stays bounded
MAX_INFLATED = 1 << 20  # bytes inflated from one token, at most (a zip bomb inflates no further)
MAX_UNESCAPE = 3  # levels of backslash escaping undone

# -- the credential patterns (the offline audit's only search: it has no canaries) --------------------------
# Every pattern's match holds one of these once lower-cased (re's case-insensitive letters lower to the
# same ASCII letter, checked for these words; "authori" and "cooki" are cut before the i, which re also
# matches with the dotless ı): a line without any cannot hold what the patterns look for, and plain
# substring tests are ~10x faster than one case-insensitive regex scan of every line.
SECRET_HINTS = ("bearer", "author", "cook", "private key")
SECRET_PATTERNS = (
    ("an Authorization header",
     re.compile(r"(?i)(proxy-)?authori[sz]ation\W{1,4}(bearer|basic|token|digest)\s+\S{6,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a cookie", re.compile(r"(?i)\"(set-)?cookie\"\s*:\s*\"[^\"]{8,}")),
)


def may_hold_secret(text: str) -> bool:
    """False when no secret pattern can match the text (nor any line of it): see ``SECRET_HINTS``."""
    text = text.lower()
    for hint in SECRET_HINTS:
        if hint in text:
            return True
    return False


def pattern_hits(text: str) -> list[str]:
    """The credential patterns a text holds, named (never echoed)."""
    if not may_hold_secret(text):
        return []
    return [label for label, pattern in SECRET_PATTERNS if pattern.search(text)]


# -- the encoded forms of a value ----------------------------------------------------------------------------
def _aligned(data: bytes, group: int, bits: int, encode: Callable[[bytes], bytes]) -> Iterable[str]:
    """The stable inner part of ``encode(prefix + data)`` for every length of prefix modulo ``group`` bytes
    (an encoding of ``bits`` per character): the characters that hold bits of ``data`` alone, whatever comes
    before or after it."""
    for shift in range(group):
        text = encode(bytes(shift) + data).decode("ascii").rstrip("=")
        start = -(-8 * shift // bits)  # the first character with no bit of the prefix
        end = 8 * (shift + len(data)) // bits  # past the last character with no bit of what follows
        yield text[start:end]


# the forms whose letters' case carries no information of the value's (a hex or base32 decoder reads either
# case; the canary is lower-case): found in any case. Base64's case is its data: found as it is only.
CASE_FREE = frozenset({"as written", "hex-encoded", "base32-encoded", "reversed", "rot13-encoded"})


def encoded_forms(value: str) -> list[tuple[str, str]]:
    """(form, needle) for every encoded form of ``value`` a line is searched for, as written first; a needle
    that is too short, or another form's, is left out. The forms of ``CASE_FREE`` are searched in any case."""
    data = value.encode("utf-8")
    forms: list[tuple[str, Iterable[str]]] = [
        ("as written", [value]),
        ("base64-encoded", _aligned(data, 3, 6, base64.b64encode)),
        ("URL-safe base64-encoded", _aligned(data, 3, 6, base64.urlsafe_b64encode)),
        ("base32-encoded", _aligned(data, 5, 5, base64.b32encode)),
        ("hex-encoded", [data.hex()]),
        ("reversed", [value[::-1]]),
        ("rot13-encoded", [codecs.encode(value, "rot13")]),
    ]
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for form, needles in forms:
        for needle in needles:
            if len(needle) >= MIN_NEEDLE and needle not in seen:
                seen.add(needle)
                out.append((form, needle))
    return out


# -- decoding a line ----------------------------------------------------------------------------------------
_BACKSLASH = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(.))", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unescape_one(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2)
    if code:
        return chr(int(code, 16))
    char = match.group(3)
    return _SIMPLE.get(char, char)


def unescape(text: str) -> str:
    """The text with its JSON and Python backslash escapes undone, up to ``MAX_UNESCAPE`` levels (a string
    JSON-encoded twice), left to right as a decoder reads them."""
    for _ in range(MAX_UNESCAPE):
        if "\\" not in text:
            break
        text = _BACKSLASH.sub(_unescape_one, text)
    return text


# (what a line must hold for the decoding to change it, the form's name, the decoding)
DECODINGS: tuple[tuple[str, str, Callable[[str], str]], ...] = (
    ("\\", "JSON-escaped", unescape),
    ("%", "percent-encoded", unquote),
    ("&", "HTML-escaped", html.unescape),
)

# base64 and hex of gzip (1f 8b 08) and zlib (78 01, 78 5e, 78 9c, 78 da) data, as it starts: base64's third
# character after a zlib header holds two bits of the next byte, hence a range. The hints are what a line must
# hold for a token to be looked for: cheap tests (a regex that starts with a literal is a fast scan).
_ZLIB_BASE64_HINT = re.compile(r"e[AFJN]")
_ZLIB_HEX_HINT = re.compile(r"78(?:01|5[eE]|9[cC]|[dD][aA])")
_COMPRESSED_TOKEN = re.compile(
    r"(?<![A-Za-z0-9+/_-])(?:(?:H4sI|eA[E-H]|eF[4-7]|eJ[w-z]|eN[o-r])[A-Za-z0-9+/_-]{8,}={0,2}"
    r"|(?:1f8b08|789c|78da|7801|785e)(?:[0-9a-f]{2}){4,}|(?:1F8B08|789C|78DA|7801|785E)(?:[0-9A-F]{2}){4,})")


def may_hold_compressed(text: str) -> bool:
    """False when the text holds no base64 or hex token of gzip or zlib data (its start, at least)."""
    return ("H4sI" in text or _ZLIB_BASE64_HINT.search(text) is not None or "1f8b08" in text or "1F8B08" in text
            or _ZLIB_HEX_HINT.search(text) is not None)


def _inflate(token: str) -> str | None:
    """What a base64 or hex token of gzip or zlib data inflates to (at most ``MAX_INFLATED`` bytes, a
    truncated stream as far as it goes), None when it is not such data."""
    try:
        if token[:2] in ("1f", "1F", "78"):
            data = bytes.fromhex(token)
        else:
            token = token.rstrip("=").replace("-", "+").replace("_", "/")
            data = base64.b64decode(token + "=" * (-len(token) % 4))
        out = zlib.decompressobj(wbits=47).decompress(data, MAX_INFLATED)  # 47: zlib or gzip header
    except (ValueError, binascii.Error, zlib.error):
        return None
    return out.decode("utf-8", "replace") if out else None


def _compressed(text: str) -> Iterable[tuple[str, str, str]]:
    """(token, form, inflated text) of the compressed tokens a text holds, at most ``MAX_COMPRESSED_TOKENS``."""
    if not may_hold_compressed(text):
        return
    for count, match in enumerate(_COMPRESSED_TOKEN.finditer(text)):
        if count >= MAX_COMPRESSED_TOKENS:
            return
        token = match.group()
        if (inflated := _inflate(token)) is not None:
            kind = "gzip" if token[:4] in ("H4sI", "1f8b", "1F8B") else "zlib"
            text_form = "hex" if token[:2] in ("1f", "1F", "78") else "base64"
            yield token, f"{kind}-compressed, {text_form}-encoded", inflated


# -- the finder ---------------------------------------------------------------------------------------------
class CanaryFinder:
    """The planted values of one run, every encoded form precomputed: ``find(text)`` says which value a line
    holds and in which forms, never the value. Built once per run (``NoSecretInLog.__init__``).

    A text is lower-cased once and searched for every needle lower-cased (one substring test each, the
    cheapest scan CPython has: ~0.1 us a needle on a 300-character line); only a text that holds one is
    searched again, form by form, base64 in its own case."""

    def __init__(self, canaries: Mapping[str, object]) -> None:
        self.canaries: dict[str, str] = {name: value for name, value in canaries.items()
                         if isinstance(value, str) and len(value) >= MIN_SECRET}
        self.needles: list[tuple[str, str, str]] = [  # (needle, name, form)
            (needle, name, form) for name, value in self.canaries.items() for form, needle in encoded_forms(value)]
        self._folded = list(dict.fromkeys(needle.lower() for needle, _, _ in self.needles))

    def __bool__(self) -> bool:
        return bool(self.needles)

    def _direct(self, text: str) -> list[tuple[str, str, str]]:
        """(needle, name, form) of every needle the text holds; a case-free form in another case is named so
        ("as written" upper-cased is "case-changed")."""
        folded = text.lower()
        if not any(map(folded.__contains__, self._folded)):
            return []
        hits = []
        for needle, name, form in self.needles:
            if needle in text:
                hits.append((needle, name, form))
            elif form in CASE_FREE and needle.lower() in folded:
                hits.append((needle, name, "case-changed" if form == "as written" else form))
        return hits

    def _views(self, text: str) -> list[tuple[str, str]]:
        """(how it was decoded, text) for the line as written and every decoding of it that changes it,
        in order (JSON escapes first, then percent-encoding, then HTML entities, each of the texts before)."""
        views = [("", text)]
        for trigger, form, decode in DECODINGS:
            for how, view in list(views):
                if trigger in view and (decoded := decode(view)) != view:
                    views.append((f"{form}, {how}" if how else form, decoded))
        return views

    def find(self, text: str) -> list[tuple[str, str]]:
        """(name, form) of every planted value the text holds, and how, each once: e.g. ("TICKETS",
        "base64-encoded"), ("TICKETS", "as written")."""
        if not self.needles:
            return []
        if not ("\\" in text or "%" in text or "&" in text):  # the common line: nothing to decode
            folded = text.lower()
            if not any(map(folded.__contains__, self._folded)) and not may_hold_compressed(text):
                return []
        found: dict[tuple[str, str], None] = {}
        seen: set[str] = set()  # needles and tokens already found in the line as written (or a text before)
        for how, view in self._views(text):
            for needle, name, form in self._direct(view):
                if needle not in seen:
                    seen.add(needle)
                    found[(name, _outward(form, how))] = None
            for token, packed, inflated in _compressed(view):
                if token not in seen:
                    seen.add(token)
                    for _, name, form in self._direct(inflated):
                        found[(name, _outward(form, _outward(packed, how)))] = None
        return list(found)


def _outward(inner: str, outer: str) -> str:
    """A form inside another, named from the inside out: "base64-encoded, percent-encoded"."""
    if not outer:
        return inner
    if inner == "as written":
        return outer
    return f"{inner}, {outer}"


def secret_hits(text: str, canaries: CanaryFinder | Mapping[str, object]) -> list[str]:
    """What secret-looking things a log line holds, named without echoing the secret: "the planted secret
    TICKETS, base64-encoded", "an Authorization header"."""
    finder = canaries if isinstance(canaries, CanaryFinder) else CanaryFinder(canaries)
    forms: dict[str, list[str]] = {}
    for name, form in finder.find(text):
        forms.setdefault(name, []).append(form)
    hits = [f"the planted secret {name}" if named == ["as written"] else
            f"the planted secret {name}, {' and '.join(named)}" for name, named in forms.items()]
    return hits + pattern_hits(text)


def name_hits(hits: list[str]) -> str:
    """The hits in one phrase: "an Authorization header, a bearer token"; "and" between them when one
    names a form ("the planted secret TICKETS, base64-encoded and a bearer token")."""
    return (" and " if any("," in hit for hit in hits) else ", ").join(hits)
