"""Tamper evidence for audit logs: a hash chain over the events, and ``verify``.

Each chained event carries ``seq`` (1, 2, 3, ...), ``prev_hash`` (the previous event's ``hash``; the
first event uses ``GENESIS``) and ``hash``: ``sha256:`` + SHA-256 of the event's canonical JSON
(``harness.fingerprint.canonical_json``) without its own ``hash`` field. Editing a line breaks its
hash, deleting or reordering lines breaks ``seq``/``prev_hash``; cutting the tail is only visible
against a head recorded earlier (``seq:hash`` printed by ``verify`` or ``Recorder.head``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from harness.errors import EvidenceError
from harness.fingerprint import canonical_json
from harness.ndjson import decode, numbered_lines

GENESIS = "sha256:" + "0" * 64


def event_hash(record: dict[str, Any]) -> str:
    """The chain hash of one event (its ``hash`` field, if any, is left out)."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def link(record: dict[str, Any], seq: int, prev_hash: str) -> dict[str, Any]:
    """Add ``seq``, ``prev_hash`` and ``hash`` to a record (in place) and return it."""
    record["seq"] = seq
    record["prev_hash"] = prev_hash
    record["hash"] = event_hash(record)
    return record


def last_link(path: Path) -> tuple[int, str]:
    """``(seq, hash)`` of the last chained line of an existing log, or ``(0, GENESIS)``.

    Lets a restarted agent continue the chain of the log it appended to before the restart.
    """
    if not path.exists() or path.stat().st_size == 0:
        return 0, GENESIS
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 65536))
        tail = handle.read().splitlines()
    for raw in reversed(tail):
        record, error = decode(raw)
        if error is not None:
            continue
        if isinstance(record, dict) and isinstance(record.get("seq"), int) and isinstance(record.get("hash"), str):
            return record["seq"], record["hash"]
    return 0, GENESIS


def parse_head(head: str) -> tuple[int | None, str]:
    """``"seq:hash"`` or a bare ``hash`` -> (seq or None, hash). Raises ValueError with the reason."""
    seq_text, sep, rest = head.partition(":")
    if sep and seq_text.isdigit():
        return int(seq_text), rest
    if head.startswith("sha256:") and len(head) == len(GENESIS):
        return None, head
    raise ValueError(f"head {head!r} is neither 'SEQ:sha256:HEX' nor 'sha256:HEX' (as printed by verify)")


def verify_lines(lines: Any, *, head: str | None = None) -> tuple[bool, str, int, str]:
    """Check a stream of raw lines. Returns (intact, message, count, last 'seq:hash')."""
    want_seq, want_hash = parse_head(head) if head else (None, None)
    prev = GENESIS
    expected_seq = 1
    head_seen = head is None
    count = 0
    for number, raw in numbered_lines(lines):
        record, error = decode(raw)
        if error is not None:
            return False, f"line {number}: {error}; the chain is broken here", count, ""
        if not isinstance(record, dict) or "hash" not in record:
            return False, f"line {number}: event has no chain fields (seq, prev_hash, hash)", count, ""
        if record.get("seq") != expected_seq:
            return False, (f"line {number}: seq is {record.get('seq')!r}, expected {expected_seq}: "
                           f"a line was deleted, inserted or moved before it"), count, ""
        if record.get("prev_hash") != prev:
            return False, (f"line {number}: prev_hash does not match the hash of the event before it: "
                           f"a line was deleted, inserted or moved"), count, ""
        if event_hash(record) != record["hash"]:
            return False, f"line {number}: hash does not match the event's content: the line was edited", count, ""
        prev = record["hash"]
        count += 1
        expected_seq += 1
        if not head_seen and record["hash"] == want_hash and want_seq in (None, record["seq"]):
            head_seen = True
    last = f"{count}:{prev}"
    if not head_seen:
        where = f"seq {want_seq}" if want_seq is not None else "the known head"
        return False, (f"the log ends at seq {count} without reaching {where} ({want_hash}): "
                       f"events were cut from the end"), count, last
    return True, f"chain intact: {count} events, head {last}", count, last


def verify_file(path: Path, *, head: str | None = None) -> tuple[bool, str]:
    """``(intact, message)`` for the chain of one log file. Raises ``EvidenceError`` when the file
    or the head cannot be used at all (the CLI's exit status 2)."""
    path = Path(path)
    if head is not None:
        try:
            parse_head(head)
        except ValueError as exc:
            raise EvidenceError(str(exc)) from None
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise EvidenceError(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        try:
            intact, message, _, _ = verify_lines(handle, head=head)
        except UnicodeDecodeError as exc:
            raise EvidenceError(f"{path} is not UTF-8 text ({exc.reason})") from None
    return intact, message
