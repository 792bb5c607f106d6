"""The typed engine's own parts: the log cut into parts at line starts, the forked workers (their failures said,
none left behind), how many read a log. Its verdicts are held to the stream's in test_triage.py and
test_parity.py."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.audit import audit_file
from harness.audit.typed import in_workers, split, workers_for
from harness.errors import EvidenceError


def lines_of(pieces: list[tuple[str, int, int, int]]) -> list[tuple[int, bytes]]:
    """The numbered lines a part's pieces hold, read as the engine reads them."""
    numbered = []
    for path, start, end, number in pieces:
        with open(path, "rb") as handle:
            handle.seek(start)
            for offset, line in enumerate(handle.read(end - start).split(b"\n")[:-1]):
                numbered.append((number + offset, line))
    return numbered


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_the_parts_cut_the_log_at_line_starts_and_number_its_lines_through(tmp_path: Path, parts: int) -> None:
    texts = [[f'{{"n": "{f}-{k}", "pad": "{"x" * (k % 13)}"}}' for k in range(40 + 17 * f)] for f in range(3)]
    files = []
    for index, lines in enumerate(texts):
        path = tmp_path / f"{index}.ndjson"
        path.write_text("\n".join(lines) + "\n")
        files.append((str(path), len(lines)))
    expected = [(n, line.encode()) for n, line in enumerate((line for lines in texts for line in lines), 1)]
    cut = split(files, parts)
    assert len(cut) == parts
    assert [line for part in cut for line in lines_of(part)] == expected


def test_a_worker_that_fails_is_said_and_none_is_left_behind() -> None:
    def fails() -> None:
        raise ValueError("bad part")

    with pytest.raises(EvidenceError, match=r"worker process \d+ failed: ValueError: bad part"):
        in_workers([fails, lambda: 1])
    with pytest.raises(EvidenceError, match=r"worker process \d+ ended \(exit status 3\) before sending"):
        in_workers([lambda: os._exit(3), lambda: 1])
    assert in_workers([lambda: "a", lambda: "b", lambda: os.getpid()])[:2] == ["a", "b"]
    assert multiprocessing.active_children() == []


def test_how_many_workers_read_a_log() -> None:
    assert workers_for(1 << 20) == 1  # a small log: forking would cost more than it saves
    assert 1 <= workers_for(1 << 30) <= 4
    assert workers_for(10, asked=3) == 3
    with pytest.raises(ValueError, match="workers 0: give 1 or more"):
        workers_for(10, asked=0)


def test_a_log_read_by_more_workers_than_it_has_lines_is_judged_whole(tmp_path: Path) -> None:
    path = tmp_path / "tiny.ndjson"
    path.write_text('{"type": "attempt", "operationId": "op_1", "attemptId": "a1", "idempotencyKey": "k1", '
                    '"payloadHash": "p1", "result": "success", "observedAt": "2026-03-02T10:00:00Z"}\n'
                    '{"type": "effect", "operationId": "op_1", "effectRef": "t1", '
                    '"observedAt": "2026-03-02T10:00:01Z"}')
    outputs = []
    for workers in (1, 2, 8):
        out = io.StringIO()
        summary = audit_file(path, format="json", out=out, engine="typed", workers=workers)
        outputs.append(json.loads(out.getvalue()))
        assert summary.outcome == "healthy" and summary.operations == 1, workers
    assert outputs[0] == outputs[1] == outputs[2]


def children_of(pid: int) -> set[int]:
    try:
        return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


SLEEPING_WORKER = """
import time
from harness.audit.typed import in_workers
in_workers([lambda: time.sleep(120), lambda: time.sleep(120)])
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process's children in /proc (Linux)")
def test_a_killed_audit_leaves_no_worker_behind() -> None:
    """SIGKILL to a process whose worker has two minutes of work left: the worker dies with it
    (PR_SET_PDEATHSIG), as an audit's workers do when the audit is killed."""
    parent = subprocess.Popen([sys.executable, "-c", SLEEPING_WORKER], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while not workers and parent.poll() is None and time.monotonic() < deadline:
            workers = children_of(parent.pid)
            time.sleep(0.01)
        assert workers, f"no worker seen (exit status {parent.poll()})"
        time.sleep(0.2)  # the worker past its start
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), workers
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in children_of(parent.pid) | workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
