"""Canonical payload fingerprints shared by the recorder, the proxy journal and the destinations.

One definition, so that an agent using our recorder, the proxy and the fake destinations all name
the same payload with the same string: ``sha256:<hex>`` of the canonical JSON form (sorted keys, no
insignificant whitespace, UTF-8). Bodies that are not JSON are hashed as raw bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

PREFIX = "sha256:"


def canonical_json(value: Any, *, ignore: Iterable[str] = ()) -> bytes:
    """Canonical bytes of a JSON value; top-level keys in ``ignore`` (volatile fields) are dropped."""
    ignored = set(ignore)
    if ignored and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in ignored}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(value: Any, *, ignore: Iterable[str] = ()) -> str:
    """Fingerprint of a JSON-compatible value."""
    return PREFIX + hashlib.sha256(canonical_json(value, ignore=ignore)).hexdigest()


def fingerprint_body(body: bytes | None, *, ignore: Iterable[str] = ()) -> str | None:
    """Fingerprint of an HTTP body: canonical JSON when it parses as JSON, raw bytes otherwise."""
    if not body:
        return None
    try:
        return fingerprint(json.loads(body), ignore=ignore)
    except (ValueError, UnicodeDecodeError):
        return PREFIX + hashlib.sha256(body).hexdigest()
