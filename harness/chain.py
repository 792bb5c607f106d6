"""Tamper evidence for audit logs: a hash chain over the events, ``verify``, and signed checkpoints.

Each chained event carries ``seq`` (1, 2, 3, ...), ``prev_hash`` (the previous event's ``hash``; the
first event uses ``GENESIS``) and ``hash``: ``sha256:`` + SHA-256 of the event's canonical JSON
(``harness.fingerprint.canonical_json``) without its own ``hash`` field. Editing a line breaks its
hash, deleting or reordering lines breaks ``seq``/``prev_hash``. Whoever can write the file can also
write a whole new consistent chain, so a chain alone proves only that its lines agree with each other;
what it is checked against says the rest: a head recorded earlier (``--head``: the log may have grown
since), the head of the finished log (``--final-head``: nothing may follow it), or a checkpoint
(``checkpoint``: the log's bytes with an HMAC-SHA256 under a key the agent never holds). The table of
attacks x modes is in docs/checker.md, "Tamper evidence: what verify proves".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.contract import CHECKPOINT_FILE, CHECKPOINT_KEY_FILE_ENV, RUN_KEY_FILE
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


def verify_lines(lines: Any, *, head: str | None = None,
                 final: bool = False) -> tuple[bool, str, int, str]:
    """Check a stream of raw lines. Returns (intact, message, count, last 'seq:hash').

    ``head`` is a head recorded earlier (``seq:hash``). Not ``final``: the last *known* head, the log may
    have grown since, and events after it are reported as not covered by it. ``final``: the head of the
    finished log (recorded at the end of a run), so any event after it was appended later: not intact.
    Without a head only the lines' consistency with each other is proven (see docs/checker.md)."""
    want_seq, want_hash = parse_head(head) if head else (None, None)
    prev = GENESIS
    expected_seq = 1
    head_seen = head is None
    head_line = 0
    count = 0
    for number, raw in numbered_lines(lines):
        record, error = decode(raw)
        if error is not None:
            return False, f"line {number}: {error}; the chain is broken here", count, ""
        if not isinstance(record, dict) or "hash" not in record:
            return False, (f"line {number}: event has no chain fields (seq, prev_hash, hash): this log is not "
                           "hash-chained. An agent chains its log with harness.recorder.Recorder(path, chain=True) "
                           "(docs/checker.md, 'Tamper evidence'); a run's log is vouched for by the checkpoint the "
                           "harness signed: verify the evidence folder itself"), count, ""
        if record.get("seq") != expected_seq:
            return False, (f"line {number}: seq is {_short(record.get('seq'))}, expected {expected_seq}: "
                           f"a line was deleted, inserted or moved before it"), count, ""
        if record.get("prev_hash") != prev:
            return False, (f"line {number}: prev_hash does not match the hash of the event before it: "
                           f"a line was deleted, inserted or moved"), count, ""
        if event_hash(record) != record["hash"]:
            return False, f"line {number}: hash does not match the event's content: the line was edited", count, ""
        prev = record["hash"]
        count += 1
        expected_seq += 1
        if not head_seen:
            if record["hash"] == want_hash and want_seq in (None, record["seq"]):
                head_seen, head_line, want_seq = True, number, record["seq"]
            elif want_seq == record["seq"]:
                return False, (f"line {number}: seq {want_seq} has hash {record['hash']}, not the known head's "
                               f"{want_hash}: the log was rewritten up to here (its chain is consistent, but "
                               f"it is not the chain the head was recorded from)"), count, ""
    last = f"{count}:{prev}"
    if not head_seen:
        if want_seq is None:
            return False, (f"the known head {want_hash} is nowhere in the log ({count} events): events were cut "
                           f"from the end, or the log was rewritten"), count, last
        return False, (f"the log ends at seq {count} without reaching seq {want_seq} of the known head: events "
                       f"were cut from the end (or the log was rewritten shorter)"), count, last
    if head is None:
        return True, (f"chain intact: {count} events, head {last} (no known head: this proves the lines agree "
                      f"with each other, not that they are the lines written; a log rewritten, cut or emptied "
                      f"as a whole passes too: give --final-head or --checkpoint)"), count, last
    after = count - (want_seq or 0)
    if after and final:
        return False, (f"{after} event(s) after the final head seq {want_seq} (line {head_line}), from seq "
                       f"{want_seq + 1 if want_seq else 1} on: appended after the head was recorded"), count, last
    if after:
        return True, (f"chain intact: {count} events, head {last}; the known head seq {want_seq} (line "
                      f"{head_line}) is in it, and the {after} event(s) after it are not covered by it (they "
                      f"agree with it, no more: use --final-head when the log was complete)"), count, last
    return True, f"chain intact: {count} events, head {last}", count, last


def _short(value: Any) -> str:
    """A value from the log, for a message: bounded, whatever it is."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _utf8_lines(handle: Any) -> Iterator[str]:
    """The file's lines as text, bad bytes kept as ``ndjson.open_text`` keeps them: a line that is not
    UTF-8 breaks the chain there, as it is a malformed line for ``check`` and ``audit``."""
    for raw in handle:
        yield raw.decode("utf-8", "surrogateescape")


def _open(path: Path) -> Any:
    try:
        return path.open("rb")
    except OSError as exc:
        raise EvidenceError(f"cannot read {path}: {exc.strerror or exc}") from None


def verify_file(path: Path, *, head: str | None = None, final: bool = False) -> tuple[bool, str]:
    """``(intact, message)`` for the chain of one log file. Raises ``EvidenceError`` when the file
    or the head cannot be used at all (the CLI's exit status 2)."""
    path = Path(path)
    if head is not None:
        try:
            parse_head(head)
        except ValueError as exc:
            raise EvidenceError(str(exc)) from None
    with _open(path) as handle:
        intact, message, _, _ = verify_lines(_utf8_lines(handle), head=head, final=final)
    return intact, message


# Signed checkpoints: what the harness saw at the end of a run, with an HMAC the agent cannot make.
_FIELDS = ("log", "bytes", "sha256", "head", "key")


def load_key(path: str | Path) -> bytes:
    """The key in a key file (its bytes, surrounding whitespace stripped); at least 16 bytes."""
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise EvidenceError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    if len(key) < 16:
        raise EvidenceError(f"the key file {path} holds {len(key)} bytes; a checkpoint key needs at least 16")
    return key


def _digest(path: Path, limit: int | None = None) -> tuple[int, str]:
    """``(size, sha256:hex)`` of the file (of its first ``limit`` bytes), read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with _open(path) as handle:
        while limit is None or size < limit:
            block = handle.read(1 << 20 if limit is None else min(1 << 20, limit - size))
            if not block:
                break
            digest.update(block)
            size += len(block)
    return size, "sha256:" + digest.hexdigest()


def _mac(body: dict[str, Any], key: bytes) -> str:
    return hmac.new(key, canonical_json({k: body.get(k) for k in _FIELDS}), hashlib.sha256).hexdigest()


def checkpoint(log_path: str | Path, key: bytes, *, key_kind: str = "operator") -> dict[str, Any]:
    """The log as it stands now: its size, the SHA-256 of its bytes, its chain head (``seq:hash``, None
    when it holds no intact chain) and an HMAC-SHA256 of these under ``key``, which the agent must not hold.
    The engine records one at the end of a run; ``verify_checkpoint`` later proves the log unchanged."""
    path = Path(log_path)
    size, sha = _digest(path) if path.exists() else (0, "sha256:" + hashlib.sha256(b"").hexdigest())
    head = None
    if size:
        with _open(path) as handle:
            intact, _, count, last = verify_lines(_utf8_lines(handle))
        head = last if intact and count else None
    body: dict[str, Any] = {"log": path.name, "bytes": size, "sha256": sha, "head": head, "key": key_kind}
    body["hmac"] = _mac(body, key)
    return body


def verify_checkpoint(log_path: str | Path, recorded: Any, key: bytes) -> tuple[bool, str]:
    """``(unchanged, message)``: is the log byte for byte what ``checkpoint`` recorded (and is the
    checkpoint itself one made with ``key``)?"""
    path = Path(log_path)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("hmac"), str) \
            or not isinstance(recorded.get("bytes"), int) or recorded["bytes"] < 0:
        raise EvidenceError("the checkpoint is not one harness.chain.checkpoint wrote (fields: "
                            + ", ".join((*_FIELDS, "hmac")) + ")")
    if not hmac.compare_digest(_mac(recorded, key), recorded["hmac"]):
        return False, ("the checkpoint's HMAC does not match: the checkpoint was forged or edited, "
                       "or this is not the key it was made with")
    want = recorded["bytes"]
    size, sha = _digest(path, want) if path.exists() else (0, "sha256:" + hashlib.sha256(b"").hexdigest())
    total = path.stat().st_size if path.exists() else 0
    if size < want:
        return False, (f"the log holds {total} of the {want} bytes checkpointed: it was cut"
                       + (" or emptied" if total == 0 else " or rewritten shorter"))
    if sha != recorded.get("sha256"):
        return False, ("the log's first " + f"{want} bytes differ from the checkpointed ones: it was edited or "
                       f"rewritten{_first_bad_line(path)}")
    if total > want:
        with _open(path) as handle:
            handle.seek(want)
            lines = sum(1 for raw in handle if raw.strip())
        return False, (f"{total - want} bytes ({lines} line(s)) after the checkpointed {want}: appended after "
                       f"the checkpoint was made, not covered by it")
    head = recorded.get("head")
    return True, (f"log unchanged since its checkpoint: {want} bytes, {recorded['sha256']}"
                  + (f", chain head {head}" if head else ", no intact chain in it") + " (HMAC-SHA256 verified)")


def verify_checkpoint_file(log_path: Path, checkpoint: Path, key_file: Path | None = None, *,
                           folder: bool) -> tuple[bool, str]:
    """``verify_checkpoint`` of a checkpoint file, with its key: ``key_file``, else the operator's
    (``CHECKPOINT_KEY_FILE_ENV``) for an operator checkpoint, else (``folder``: the checkpoint is an
    evidence folder's) the per-run key beside it. Raises ``EvidenceError`` when it cannot be checked."""
    try:
        recorded = json.loads(checkpoint.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot read the checkpoint {checkpoint}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    operator = isinstance(recorded, dict) and recorded.get("key") == "operator"
    if key_file is None and operator and os.environ.get(CHECKPOINT_KEY_FILE_ENV):
        key_file = Path(os.environ[CHECKPOINT_KEY_FILE_ENV])
    if key_file is None and folder and not operator:
        key_file = checkpoint.parent / RUN_KEY_FILE
    if key_file is None:
        raise EvidenceError(f"verifying {checkpoint} needs its key: give --key-file (or set {CHECKPOINT_KEY_FILE_ENV})")
    intact, message = verify_checkpoint(log_path, recorded, load_key(key_file))
    if intact and isinstance(recorded, dict) and recorded.get("key") == "run":
        message += ("; a per-run key kept in the evidence folder: this proves the log is the one the harness "
                    "saw at the end of the run against the agent, not against whoever can write the folder")
    return intact, message


def _first_bad_line(path: Path) -> str:
    """Where the chain itself says the log was changed, when it is chained."""
    try:
        with _open(path) as handle:
            intact, message, _, _ = verify_lines(_utf8_lines(handle))
    except EvidenceError as exc:
        return f"; {exc}"
    return "" if intact else f"; the chain says: {message}"


def checkpoint_key(folder: str | Path) -> tuple[bytes, str]:
    """The key a run's checkpoints are signed with and its kind: the operator's (``CHECKPOINT_KEY_FILE_ENV``),
    else a new per-run key written into the folder's ``RUN_KEY_FILE`` (over whatever the agent may have put
    there: the engine asks for it once the agent has exited, so the agent never sees a per-run key)."""
    key_file = os.environ.get(CHECKPOINT_KEY_FILE_ENV)
    if key_file:
        return load_key(key_file), "operator"
    key = secrets.token_hex(32).encode()
    run_key = Path(folder) / RUN_KEY_FILE
    run_key.unlink(missing_ok=True)  # a file planted there is not ours to write through
    run_key.write_bytes(key)
    run_key.chmod(0o600)
    return key, "run"


def write_checkpoints(folder: str | Path, key: bytes, kind: str, files: Mapping[str, str]) -> dict[str, str]:
    """Sign each file of ``files`` (its name -> its checkpoint's name) as it stands now; returns ``files``."""
    folder = Path(folder)
    for name, checkpoint_name in files.items():
        (folder / checkpoint_name).write_text(json.dumps(checkpoint(folder / name, key, key_kind=kind), indent=2)
                                              + "\n", encoding="utf-8")
    return dict(files)


def record_checkpoint(folder: str | Path, log_name: str = "agent.ndjson",
                      also: Mapping[str, str] | None = None) -> Path:
    """Write ``CHECKPOINT_FILE`` for the agent log of an evidence folder, with ``checkpoint_key``'s key; returns
    the checkpoint's path. ``also``: other files the agent wrote (its trace) -> their checkpoint file names,
    signed with the same key."""
    key, kind = checkpoint_key(folder)
    write_checkpoints(folder, key, kind, {**(also or {}), log_name: CHECKPOINT_FILE})
    return Path(folder) / CHECKPOINT_FILE
