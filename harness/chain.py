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

from harness.contract import CHECKPOINT_FILE, CHECKPOINT_KEY_FILE_ENV, KEY_STORE_ENV, harness_cache
from harness.errors import EvidenceError
from harness.fingerprint import canonical_json
from harness.ndjson import decode, numbered_lines
from harness.safe_files import SMALL_FILE_BYTES, open_regular, read_regular, regular_size, write_file

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
        return open_regular(path, _NO_BOUND)
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
KEY_KINDS = ("operator", "run")  # the operator's key file (CHECKPOINT_KEY_FILE_ENV), or the run's (``key_store``)
EMPTY_SHA = "sha256:" + hashlib.sha256(b"").hexdigest()
_NO_BOUND = 1 << 62  # a file only digested block by block, or only measured


def load_key(path: str | Path) -> bytes:
    """The key in a key file (its bytes, surrounding whitespace stripped); at least 16 bytes."""
    try:
        key = read_regular(path, SMALL_FILE_BYTES, what=f"the key file {path}").strip()
    except OSError as exc:
        raise EvidenceError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    if len(key) < 16:
        raise EvidenceError(f"the key file {path} holds {len(key)} bytes; a checkpoint key needs at least 16")
    return key


def _digest(path: Path, limit: int | None = None) -> tuple[int, str, int]:
    """``(bytes read, sha256:hex, file size)`` of the file (of its first ``limit`` bytes), read in blocks. A
    missing file is empty; one that is no regular file is an ``UnsafeFile``."""
    digest = hashlib.sha256()
    size = 0
    try:
        handle = open_regular(path, _NO_BOUND)
    except FileNotFoundError:
        return 0, EMPTY_SHA, 0
    with handle:
        total = os.fstat(handle.fileno()).st_size
        while limit is None or size < limit:
            block = handle.read(1 << 20 if limit is None else min(1 << 20, limit - size))
            if not block:
                break
            digest.update(block)
            size += len(block)
    return size, "sha256:" + digest.hexdigest(), total


def _mac(body: dict[str, Any], key: bytes) -> str:
    return hmac.new(key, canonical_json({k: body.get(k) for k in _FIELDS}), hashlib.sha256).hexdigest()


def seal(name: str, size: int, sha256: str | None, head: str | None, key: bytes, key_kind: str) -> dict[str, Any]:
    """A checkpoint of what a writer knows it wrote (the fault proxy seals its journal from its own running
    digest, not from the file, which the agent could have changed meanwhile) or of a file as it stands:
    ``sha256`` None when the harness did not read it (over its bound, or no regular file)."""
    body: dict[str, Any] = {"log": name, "bytes": size, "sha256": sha256, "head": head, "key": key_kind}
    body["hmac"] = _mac(body, key)
    return body


def checkpoint(log_path: str | Path, key: bytes, *, key_kind: str = "operator",
               limit: int | None = None) -> dict[str, Any]:
    """The log as it stands now: its size, the SHA-256 of its bytes, its chain head (``seq:hash``, None
    when it holds no intact chain) and an HMAC-SHA256 of these under ``key``, which the agent must not hold.
    The engine records one at the end of a run; ``verify_checkpoint`` later proves the log unchanged. A file over
    ``limit`` bytes, or no regular file, is measured, not read: its digest is None (never judged, so never
    shown unchanged either)."""
    path = Path(log_path)
    size = regular_size(path)
    if size is None and (path.exists() or path.is_symlink()):
        return seal(path.name, 0, None, None, key, key_kind)
    if size is not None and limit is not None and size > limit:
        return seal(path.name, size, None, None, key, key_kind)
    size, sha, _ = _digest(path)
    head = None
    if size:
        with open_regular(path, _NO_BOUND) as handle:
            intact, _, count, last = verify_lines(_utf8_lines(handle))
        head = last if intact and count else None
    return seal(path.name, size, sha, head, key, key_kind)


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
    if recorded.get("sha256") is None:
        return False, (f"the harness did not read it at the end of the run ({want:,} bytes, over its bound, or no "
                       "regular file): it cannot be shown unchanged")
    size, sha, total = _digest(path, want)
    if size < want:
        return False, (f"the log holds {total} of the {want} bytes checkpointed: it was cut"
                       + (" or emptied" if total == 0 else " or rewritten shorter"))
    if sha != recorded.get("sha256"):
        return False, ("the log's first " + f"{want} bytes differ from the checkpointed ones: it was edited or "
                       f"rewritten{_first_bad_line(path)}")
    if total > want:
        with open_regular(path, _NO_BOUND) as handle:
            handle.seek(want)
            lines = handle.read(1 << 20).count(b"\n")
        return False, (f"{total - want} bytes ({lines or 'part of a'} line(s)) after the checkpointed {want}: "
                       "appended after the checkpoint was made, not covered by it")
    head = recorded.get("head")
    return True, (f"log unchanged since its checkpoint: {want} bytes, {recorded['sha256']}"
                  + (f", chain head {head}" if head else ", no intact chain in it") + " (HMAC-SHA256 verified)")


def read_checkpoint(checkpoint: Path) -> Any:
    """A checkpoint file's JSON (bounded, a regular file); ``EvidenceError`` when it cannot be read."""
    try:
        return json.loads(read_regular(checkpoint, SMALL_FILE_BYTES))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot read the checkpoint {checkpoint}: {getattr(exc, 'strerror', None) or exc}") \
            from None


def verify_checkpoint_file(log_path: Path, checkpoint: Path, key_file: Path | None = None, *,
                           folder: bool) -> tuple[bool, str]:
    """``verify_checkpoint`` of a checkpoint file, with its key: ``key_file``, else the operator's
    (``CHECKPOINT_KEY_FILE_ENV``) for an operator checkpoint, else (``folder``: the checkpoint is an
    evidence folder's) the run's key in ``key_store``. Raises ``EvidenceError`` when it cannot be checked."""
    recorded = read_checkpoint(checkpoint)
    kind = recorded.get("key") if isinstance(recorded, dict) else None
    if key_file is not None:
        key = load_key(key_file)
    elif folder:
        key = folder_key(checkpoint.parent, kind)
    elif kind == "operator" and os.environ.get(CHECKPOINT_KEY_FILE_ENV):
        key = load_key(os.environ[CHECKPOINT_KEY_FILE_ENV])
    else:
        raise EvidenceError(f"verifying {checkpoint} needs its key: give --key-file (or set {CHECKPOINT_KEY_FILE_ENV})")
    intact, message = verify_checkpoint(log_path, recorded, key)
    if intact and key_file is None and kind == "run":
        message += (f"; under the run's own key, kept outside the folder in this user's key store ({key_store()}): "
                    "this proves it against the agent and whoever can write the folder but not read the store, on "
                    "this machine only")
    return intact, message


def _first_bad_line(path: Path) -> str:
    """Where the chain itself says the log was changed, when it is chained."""
    try:
        with _open(path) as handle:
            intact, message, _, _ = verify_lines(_utf8_lines(handle))
    except EvidenceError as exc:
        return f"; {exc}"
    return "" if intact else f"; the chain says: {message}"


# A run's key, when the operator gave none: made when the run starts and held in memory (the fault proxy gets it
# over its pipe), written only once the agent has exited, outside the evidence folder, in the user's key store
# (0700 folder, 0600 file), under a name derived from the folder's real path. The store's entry is reserved
# empty when the run starts, so a folder of a run made here is known as one, and refused whole when it is no
# longer sealed, whatever its context.json says.
def key_store() -> Path:
    """Where the harness keeps its runs' keys: ``KEY_STORE_ENV``, else ``$XDG_CACHE_HOME/retry-harness/keys``
    (``~/.cache/retry-harness/keys``)."""
    if os.environ.get(KEY_STORE_ENV):
        return Path(os.environ[KEY_STORE_ENV])
    return harness_cache() / "keys"


def run_key_path(folder: str | Path) -> Path:
    """The key store's entry of the evidence folder ``folder`` (its real path's SHA-256)."""
    real = os.path.realpath(folder)
    return key_store() / (hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:40] + ".key")


def new_run_key(folder: str | Path) -> tuple[bytes, str]:
    """The key a run's evidence is sealed with, and its kind: the operator's (``CHECKPOINT_KEY_FILE_ENV``), else a
    new one, kept in memory until ``keep_run_key`` (its store entry reserved empty now)."""
    key_file = os.environ.get(CHECKPOINT_KEY_FILE_ENV)
    if key_file:
        return load_key(key_file), "operator"
    store = key_store()
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_file(run_key_path(folder), b"", mode=0o600)
    return secrets.token_hex(32).encode(), "run"


def keep_run_key(folder: str | Path, key: bytes, kind: str) -> None:
    """Write a run's key into its store entry (nothing for the operator's): called once the agent has exited."""
    if kind == "run":
        key_store().mkdir(parents=True, exist_ok=True, mode=0o700)  # a controller's, for a remote worker's run
        write_file(run_key_path(folder), key, mode=0o600)


def forget_run_key(folder: str | Path) -> None:
    """Remove a run's key store entry, its folder being deleted (a passed run not kept)."""
    run_key_path(folder).unlink(missing_ok=True)


def harness_run(folder: str | Path) -> bool:
    """Whether ``folder`` was made by a run of the harness on this machine, as this user (its key store entry)."""
    return run_key_path(folder).exists()


def folder_key(folder: str | Path, kind: Any) -> bytes:
    """The key of an evidence folder's checkpoints of ``kind``; ``EvidenceError`` saying why there is none."""
    if kind == "operator":
        if not os.environ.get(CHECKPOINT_KEY_FILE_ENV):
            raise EvidenceError(f"its checkpoints are under the operator's key: give --key-file (or set "
                                f"{CHECKPOINT_KEY_FILE_ENV})")
        return load_key(os.environ[CHECKPOINT_KEY_FILE_ENV])
    if kind != "run":
        raise EvidenceError(f"the checkpoint names no key this harness knows ({_short(kind)}; valid: "
                            f"{', '.join(KEY_KINDS)})")
    entry = run_key_path(folder)
    try:
        key = read_regular(entry, SMALL_FILE_BYTES).strip()
    except FileNotFoundError:
        raise EvidenceError("its run's key is not on this machine (the run was made elsewhere, as another user, or "
                            "the folder was moved): only the machine that ran it can vouch for it, or run under "
                            f"the operator's key ({CHECKPOINT_KEY_FILE_ENV}) to check it anywhere") from None
    if not key:
        raise EvidenceError("its run never sealed it: the harness stopped before the end of its teardown")
    return key


def write_checkpoints(folder: str | Path, key: bytes, kind: str, files: Mapping[str, str], *,
                      limits: Mapping[str, int] | None = None) -> dict[str, str]:
    """Sign each file of ``files`` (its name -> its checkpoint's name) as it stands now; returns ``files``.
    ``limits``: a file's bound (its name -> bytes): over it, it is measured, not read."""
    folder = Path(folder)
    for name, checkpoint_name in files.items():
        write_checkpoint(folder / checkpoint_name,
                         checkpoint(folder / name, key, key_kind=kind, limit=(limits or {}).get(name)))
    return dict(files)


def write_checkpoint(path: Path, body: Mapping[str, Any]) -> None:
    write_file(path, json.dumps(body, indent=2) + "\n")


def record_checkpoint(folder: str | Path, log_name: str = "agent.ndjson",
                      also: Mapping[str, str] | None = None) -> Path:
    """Write ``CHECKPOINT_FILE`` for the agent log of an evidence folder, with a new run key (kept in the store)
    or the operator's; returns the checkpoint's path. ``also``: other files the agent wrote (its trace) -> their
    checkpoint file names, signed with the same key."""
    key, kind = new_run_key(folder)
    write_checkpoints(folder, key, kind, {**(also or {}), log_name: CHECKPOINT_FILE})
    keep_run_key(folder, key, kind)
    return Path(folder) / CHECKPOINT_FILE
