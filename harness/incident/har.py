"""A HAR file (HTTP Archive 1.2: browsers' devtools, mitmproxy's HAR export, the harness's own ``traffic.har``)
read into the incident model.

The HAR spec is JSON, so the standard library reads it (``json``); what the readers of several tools write
is handled here:

- an answer the client never got is ``response.status: 0`` (Chrome and Firefox, mitmproxy's export) and
  usually ``response._error`` (Chrome: ``net::ERR_EMPTY_RESPONSE``, ``net::ERR_TIMED_OUT``, ...;
  mitmproxy: its flow's error). Either makes ``Exchange.status`` None, with ``error`` the ``_error`` text
  (or ``"no response"``); an answer with ``_error`` (a body cut off) is no answer either;
- HTTP/2 pseudo-headers (``:authority``, ``:method``) are left out; header names are lower-cased,
  repeats joined by ``", "``; bodies come from ``postData.text`` (else its ``params``, form-encoded) and
  ``content.text`` (base64-decoded when ``content.encoding`` is ``base64``);
- the harness's own entries carry ``_harness`` (``flow_id``, ``rule_id``, ``fault``, ``client_outcome``,
  ``upstream_status``, ``destination``): ``upstream_status`` and ``fault`` are kept, and ``destination``
  is the scenario's destination name instead of the URL's host:port;
- a ``.zhar`` (mitmproxy's zlib-compressed HAR) is read too.

Entries are in time order (``startedDateTime``); ``Exchange.line`` is the entry's number in ``log.entries``
(1-based). Entries that are no HTTP request (``data:``, ``blob:``, ``chrome-extension:`` URLs, WebSocket
frames) are left out and said in ``Incident.notes``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import zlib
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from harness.incident.model import Exchange, Incident, IncidentError

EXPECTED = "expected a HAR 1.2 file (JSON with log.entries: browser devtools, mitmproxy's HAR export)"
DEFAULT_PORTS = {"http": 80, "https": 443}


def header_dict(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as the incident model keeps them: names lower-case, repeats joined by ", ", HTTP/2
    pseudo-headers left out."""
    out: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        if name.startswith(":"):
            continue
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def load_har(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The HAR document of ``path`` (a dict with ``log.entries``), or IncidentError naming the file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise IncidentError(f"{path}: cannot read: {exc.strerror}; {EXPECTED}") from None
    if data[:1] == b"\x78":  # a zlib stream: mitmproxy's .zhar
        try:
            data = zlib.decompress(data)
        except zlib.error:
            pass
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise IncidentError(f"{path}: not a HAR file: not text; {EXPECTED}") from None
    except json.JSONDecodeError as exc:
        raise IncidentError(f"{path}: not a HAR file: not JSON ({exc.msg} at line {exc.lineno}, column "
                            f"{exc.colno}); {EXPECTED}") from None
    except (ValueError, RecursionError) as exc:  # nested past the parser's depth, an integer past its digits
        raise IncidentError(f"{path}: not a HAR file: JSON beyond the parser's limits ({str(exc)[:80]}); "
                            f"{EXPECTED}") from None
    log = doc.get("log") if isinstance(doc, dict) else None
    if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
        found = f"keys {sorted(doc)[:8]}" if isinstance(doc, dict) else f"a JSON {type(doc).__name__}"
        raise IncidentError(f"{path}: not a HAR file: JSON without log.entries ({found}); {EXPECTED}")
    return doc


def is_har(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a HAR document (JSON with ``log.entries``)."""
    try:
        load_har(path)
    except IncidentError:
        return False
    return True


def read_har(path: str | os.PathLike[str]) -> Incident:
    """The incident a HAR file shows: one ``Exchange`` per HTTP request, in time order (see the module's doc)."""
    doc = load_har(path)
    entries = doc["log"]["entries"]
    notes: list[str] = []
    exchanges: list[Exchange] = []
    skipped: dict[str, int] = {}
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
            raise IncidentError(f"{path}: log.entries[{number - 1}] is not a HAR entry (an object with request); "
                                f"{EXPECTED}")
        exchange = _exchange(path, entry, number)
        if isinstance(exchange, str):
            skipped[exchange] = skipped.get(exchange, 0) + 1
        else:
            exchanges.append(exchange)
    for kind, count in sorted(skipped.items()):
        notes.append(f"{count} HAR entr{'y' if count == 1 else 'ies'} left out: {kind}")
    if not exchanges:
        said = f" ({'; '.join(notes)})" if notes else ""
        raise IncidentError(f"{path}: a HAR file with no HTTP requests (log.entries holds {len(entries)} "
                            f"entr{'y' if len(entries) == 1 else 'ies'}{said}); expected at least one request")
    if all(e.started is not None for e in exchanges):
        exchanges.sort(key=lambda e: e.started or 0.0)  # stable: entries of one instant keep their order
    else:
        notes.append("some HAR entries have no startedDateTime: entries kept in file order")
    return Incident(source=str(path), format="har", exchanges=exchanges, notes=notes)


def _exchange(path: str | os.PathLike[str], entry: dict[str, Any], number: int) -> Exchange | str:
    """One entry as an Exchange, or why it is left out."""
    request = entry["request"]
    url = str(request.get("url") or "")
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return f"not an http(s) URL ({parts.scheme or url[:20] or 'no URL'}:)"
    if entry.get("_resourceType") == "websocket" or entry.get("_webSocketMessages"):
        return "WebSocket"
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return f"a URL with a bad port ({url[:60]})"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    harness = _object(entry.get("_harness"))
    response = _object(entry.get("response"))
    status = response.get("status")
    error = response.get("_error") or None
    got_answer = isinstance(status, int) and status > 0 and not error
    if not got_answer and error is None:
        error = "no response"
    upstream = harness.get("upstream_status")
    return Exchange(
        destination=str(harness.get("destination") or f"{host}:{port}"),
        method=str(request.get("method") or "GET").upper(),
        path=parts.path or "/",
        query=parts.query,
        headers=header_dict(_pairs(request.get("headers"))),
        body=_post_data(request.get("postData")),
        started=_timestamp(entry.get("startedDateTime")),
        seconds=entry["time"] / 1000 if isinstance(entry.get("time"), int | float) and entry["time"] >= 0 else None,
        status=status if got_answer else None,
        response_headers=header_dict(_pairs(response.get("headers"))) if got_answer else {},
        response_body=_content(path, response.get("content"), number) if got_answer else b"",
        error=None if got_answer else str(error),
        upstream_status=upstream if isinstance(upstream, int) else None,
        fault=str(harness["fault"]) if harness.get("fault") else None,
        line=number,
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pairs(headers: Any) -> list[tuple[str, str]]:
    if not isinstance(headers, list):
        return []
    return [(str(h["name"]), str(h.get("value", ""))) for h in headers if isinstance(h, dict) and "name" in h]


def _post_data(post: Any) -> bytes:
    if not isinstance(post, dict):
        return b""
    text = post.get("text")
    if isinstance(text, str):
        if post.get("encoding") == "base64":  # not in the spec for postData, but some tools write it
            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                pass
        return text.encode("utf-8", "surrogateescape")
    params = _pairs([{"name": p.get("name"), "value": p.get("value", "")} for p in post.get("params") or []
                     if isinstance(p, dict) and p.get("name") is not None])
    return urlencode(params).encode() if params else b""


def _content(path: str | os.PathLike[str], content: Any, number: int) -> bytes:
    if not isinstance(content, dict) or not isinstance(content.get("text"), str):
        return b""
    text = content["text"]
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode(text)
        except (binascii.Error, ValueError):
            raise IncidentError(f"{path}: log.entries[{number - 1}].response.content says base64 but is not; "
                                f"{EXPECTED}") from None
    return text.encode("utf-8", "surrogateescape")


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
