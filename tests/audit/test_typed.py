"""The typed engine's own parts: the log cut into parts at line starts, the forked workers (their failures said,
none left behind), how many read a log. Its verdicts are held to the stream's in test_triage.py and
test_parity.py."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
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
