"""The audit split across processes by operation id, the outputs merged back in one process's order.

Every worker reads the whole file and audits only the lines of its operations (the id is read
straight from the text where that is unambiguous, else from the parsed line; a line with no
operation goes to the worker its line number picks). One process judges an operation once it is
resolved and ``window`` more were, then the rest at the end of the file in first-seen order; a
worker cannot see the others' resolutions, so it tags each output with the line of the operation's
resolution and of its first line, and the parent restores that order. The verdicts cannot differ
from one process's as long as no operation's verdict depends on another operation or on when it was
judged; a worker bails out (ShardBail) where one might, and the parent checks that no value a run
rule compares across operations (``RunRule.shared_values``: intent ids, idempotency keys) is shared
across workers; on any doubt the file is audited again by one process.
"""

from __future__ import annotations

import gc
import heapq
import json
import multiprocessing
import os
import shutil
import tempfile
from array import array
from collections import defaultdict
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from harness.audit.article import _article_line
from harness.audit.stream import AuditProgress, ShardBail, StreamingAudit, _blocks, _stats, position
from harness.checker import Finding, OperationContext
from harness.events import parse_line
from harness.ndjson import open_text

# Below this size one process audits the file: forking workers costs more than it saves.
SHARD_MIN_BYTES = 16_000_000
# How a worker reads a line's operation id without parsing it (compact and spaced JSON)
_OPERATION_ID_KEYS = ('"operation_id":"', '"operation_id": "')
# Set in the parent just before its workers fork, when it shows progress: per shard, bytes read and
# unhealthy operations so far (a shared array the forked workers inherit; None: nobody is listening).
_PROGRESS: Any = None


def _cores() -> int:
    """The cores this process may run on (not all the machine's, under an affinity mask or a container)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1



def _owner(text: str, number: int) -> str | int:
    """The operation id of a line as parsing gives it, or its line number when it has none."""
    record, _ = parse_line(text)
    if record is not None:
        return record["operation_id"]
    article = _article_line(text, number)
    if article is not None and article[0] is not None:
        return article[0]["operation_id"]
    return number


def _shard_worker(path: str, name: str, format: str, window: int, shard: int, shards: int,
                  folder: str) -> dict[str, Any]:
    """Audit one shard; outputs go to two files sorted for the merge (see ``_merge_pieces``)."""
    gc.disable()  # see _audit_alone
    resolved_file = open(os.path.join(folder, f"{shard}.resolved"), "w", encoding="utf-8", newline="\n")
    open_file = open(os.path.join(folder, f"{shard}.open"), "w", encoding="utf-8", newline="\n")
    first_line: dict[str, int] = {}
    resolved_count = 0

    def sink(op: OperationContext, piece: str) -> None:
        nonlocal resolved_count
        first = first_line.pop(op.operation_id)
        text = piece if format == "json" else json.dumps(piece)  # one line per output
        if op.resolutions:
            resolved_file.write(f"{op.resolutions[-1]['_line']}\t{first}\t{text}\n")
            resolved_count += 1
        else:  # only finish() judges these, in first-seen order: already sorted
            open_file.write(f"{first}\t{text}\n")

    audit = StreamingAudit(name, sink, format=format, window=window, sharded=True)
    owner: str | int | None  # a line's operation id or number; declared here, so the loop's owner = None narrows
    try:
        with open_text(path) as handle, resolved_file, open_file:
            feed = audit.feed
            number = 0
            for lines, read_text in _blocks(handle, None):
                for text in lines:
                    number += 1
                    if text[0] != "{" and not text.strip():
                        continue
                    owner = None
                    for key in _OPERATION_ID_KEYS:
                        start = text.find(key)
                        if start >= 0:
                            start += len(key)
                            owner = text[start:text.find('"', start)]
                            break
                    if owner is None or "\\" in owner:
                        owner = _owner(text, number)
                    if hash(owner) % shards != shard:  # the same hash in every forked worker
                        continue
                    audit.expected_operation = owner
                    feed(number, text.rstrip("\r\n"), read_text)
                    if type(owner) is str and owner not in first_line and owner in audit.open:
                        first_line[owner] = number  # the line that opened it (a malformed one does not)
                if _PROGRESS is not None:
                    _PROGRESS[2 * shard], _PROGRESS[2 * shard + 1] = position(handle), audit.unhealthy
            # the end of the file: resolved operations in resolution order, then the rest
            for op_id in list(audit.resolved):
                audit.resolved.pop(op_id)
                audit._judge(op_id)
            audit.finish()
    except ShardBail as bail:
        return {"bail": str(bail)}
    return {"stats": _stats(audit), "run_findings": audit.run_findings, "resolved": resolved_count,
            "shared": {code: _hashes(values) for code, values in audit.run_rules.shared_values().items()}}


def _hashes(values: Any) -> array[int]:
    """The values' hashes, 8 bytes each, for the parent's overlap check: two workers' hash arrays that
    share no number share no value, and a shared number (a collision, about 1 in 10^9 here) only costs
    a second audit by one process. A set of the values themselves took a hundred MB in the parent."""
    return array("q", sorted(hash(v) for v in values))


def _audit_sharded(path: Path, name: str, format: str, window: int, workers: int,
                   write: Any = None, progress: AuditProgress | None = None
                   ) -> tuple[dict[str, Any], list[Finding]] | None:
    """Audit with ``workers`` processes, ``write(piece)`` for each operation's output in one process's order;
    None when one process must do it (see the notes above): then nothing was written. ``progress`` hears,
    a few times a second, the bytes every worker has read and the unhealthy operations they found so far."""
    global _PROGRESS
    folder = tempfile.mkdtemp(prefix="audit-shards-")
    try:
        before = _file_version(path)
        context = multiprocessing.get_context("fork")
        shared = _PROGRESS = context.Array("q", 2 * workers, lock=False) if progress is not None else None
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                futures = [pool.submit(_shard_worker, str(path), name, format, window, shard, workers, folder)
                           for shard in range(workers)]
                while shared is not None and progress is not None:
                    done, running = wait(futures, timeout=0.25, return_when=FIRST_EXCEPTION)
                    progress(min(shared[0::2]), sum(shared[1::2]))
                    if not running or any(f.exception() is not None for f in done):
                        break
                results = [f.result() for f in futures]
        except BrokenProcessPool:  # a worker died (out of memory, killed): one process tries alone
            return None
        finally:
            _PROGRESS = None
        # a log still being written: the workers may have read different lengths of it
        if any("bail" in r for r in results) or _file_version(path) != before:
            return None
        for code in results[0]["shared"]:  # what a run rule compares across operations (intent ids, keys)
            seen: set[int] = set()
            for r in results:
                if not seen.isdisjoint(r["shared"][code]):
                    return None  # a value seen by two workers: one process judges the rule across them
                seen.update(r["shared"][code])
            del seen
        stats: dict[str, Any] = {"events": 0, "malformed": 0, "classes": defaultdict(int), "unhealthy": 0,
                                 "findings": 0}
        for r in results:
            for key in ("events", "malformed", "unhealthy", "findings"):
                stats[key] += r["stats"][key]
            for cls, n in r["stats"]["classes"].items():
                stats["classes"][cls] += n
        if progress is not None and shared is not None:
            progress(min(shared[0::2]), stats["unhealthy"])
        # run-wide findings in line order, as one process appends them (a line's all come from one worker)
        run_findings = sorted((f for r in results for f in r["run_findings"]), key=lambda f: f.evidence[0]["line"])
        for piece in _merge_pieces(folder, workers, sum(r["resolved"] for r in results), window, format):
            if write is not None:
                write(piece)
        return stats, run_findings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _file_version(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _merge_pieces(folder: str, workers: int, resolved: int, window: int, format: str) -> Any:
    """The workers' outputs in one process's order: first the operations the window judged, by their
    resolution's line (all resolved ones but the last ``window``); then the rest by first line."""
    def read(kind: str, shard: int) -> Any:
        with open(os.path.join(folder, f"{shard}.{kind}"), encoding="utf-8", newline="\n") as handle:
            for row in handle:
                fields = row.rstrip("\n").split("\t", 2 if kind == "resolved" else 1)
                piece = fields[-1] if format == "json" else json.loads(fields[-1])
                yield int(fields[0]), (int(fields[1]) if kind == "resolved" else 0), piece

    early = max(0, resolved - window)
    tail: list[tuple[int, int, str]] = []
    for index, (_, first, piece) in enumerate(heapq.merge(*(read("resolved", s) for s in range(workers)))):
        if index < early:
            if piece:
                yield piece
        else:
            tail.append((first, 0, piece))
    tail.sort()
    for _, _, piece in heapq.merge(tail, *(read("open", s) for s in range(workers))):
        if piece:
            yield piece

