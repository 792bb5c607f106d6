"""Which incident format a file holds, from its content (never its name): ``incident_format``.

- ``"flows"``: a mitmproxy flow dump. Each flow is a tnetstring: ``LENGTH:PAYLOAD`` then a type byte, ``}``
  for the flow's dict, whose first key is itself a tnetstring (``DIGITS:``).
- ``"har"``: JSON (or mitmproxy's zlib-compressed ``.zhar``) whose ``log.entries`` is a list.

Anything else is ``None`` (an audit log, an evidence folder, the article's NDJSON: the caller's to tell).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

HEAD = 64 * 1024
_TNETSTRING = re.compile(rb"(\d{1,12}):\d{1,12}:")


def incident_format(path: str | os.PathLike[str]) -> str | None:
    """``"har"``, ``"flows"`` or None for what ``path`` holds (None also for a folder or a file that cannot be read)."""
    file = Path(path)
    if not file.is_file():
        return None
    try:
        with file.open("rb") as f:
            head = f.read(HEAD)
            match = _TNETSTRING.match(head)
            if match:
                f.seek(match.end(1) + 1 + int(match.group(1)))
                if f.read(1) == b"}":
                    return "flows"
    except OSError:
        return None
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith(b"{") or head[:1] == b"\x78":
        from harness.incident.har import is_har

        return "har" if is_har(file) else None
    return None
