"""What keeps judging a large run linear and its memory near the evidence's size (benchmarks/check_scale_bench.py):
the cyclic garbage collector is paused while a run is read and judged (harness.limits.collector_paused) and always
comes back after; verdict.json is written by orjson (harness.ndjson.json_document), with the stdlib's meaning for
what orjson refuses, an operation at a time (harness.ndjson.Items) yet byte for byte the whole document; the
evidence's sources share their strings (harness.ndjson.share_strings).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.checker import check
from harness.evidence import load_evidence
from harness.limits import collector_paused
from harness.ndjson import Items
from harness.writers import write_verdict_json
from tests.browser.synthetic import build


@pytest.fixture
def collecting() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_nested_pauses_end_with_the_outermost(collecting: None) -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collecting: None) -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_it_comes_back_after_an_exception(collecting: None) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_overlapping_threads_bring_it_back_when_the_last_ends(collecting: None) -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with collector_paused():
            second_in.set()
            first_out.wait(10)
            seen["after the first left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first left": False}
    assert gc.isenabled()


def test_reading_and_judging_a_run_trigger_no_full_collection(collecting: None, tmp_path: Path) -> None:
    build(tmp_path, 2000)  # tens of thousands of objects: several automatic collections if the collector ran
    # the building's own collections left the oldest generation's count anywhere up to its threshold: one young
    # collection as a pause ends could then bring a full one, as it would after any earlier test; start at zero
    gc.collect()
    collections: list[int] = []
    judging = threading.get_ident()

    def heard(phase: str, info: dict[str, int]) -> None:
        # the judging thread's own: another thread of this worker (a proxy embedded by an earlier test, xdist's
        # channel) may ask for a collection itself (gc.collect), which no pause of ours can or should stop
        if phase == "start" and threading.get_ident() == judging:
            collections.append(info["generation"])

    gc.callbacks.append(heard)
    try:
        verdict = check(load_evidence(tmp_path))
    finally:
        gc.callbacks.remove(heard)
    assert len(verdict.operations) >= 2000  # it did judge the run
    # unpaused, about 230 (two full ones); paused, one young collection at most as each of the two pauses ends
    assert len(collections) <= 2 and 2 not in collections, collections
    assert gc.isenabled()


@pytest.mark.parametrize("value", [
    {"operations": [{"id": "op_1", "params": {"title": "é ✓"}, "n": 3, "ok": True, "none": None}]},
    {"big": 2**70, "text": "x"},  # beyond 64 bits: orjson refuses, json writes it
    {"byte": "\udcff"},  # a lone surrogate (a log byte that is not UTF-8): orjson refuses, json escapes it
    {1: "a non-string key", "path": Path("/tmp/x")},  # as json.dumps(default=str) writes them
])
def test_a_json_document_reads_back_as_the_stdlib_writes_it(value: dict[str, object]) -> None:
    import json

    from harness.ndjson import json_document

    data = json_document(value)
    assert data.endswith(b"}\n") and b'\n  "' in data  # indented, newline-ended
    assert json.loads(data) == json.loads(json.dumps(value, default=str))


@pytest.mark.parametrize("value", [
    {"operations": Items([], dict)},
    {"scenario": "s", "operations": Items([1, {"x": [], "é": "✓"}], lambda item: item), "facts": {}, "n": [1, {}]},
    {"operations": Items([2**70], lambda item: item)},  # orjson refuses it: the whole document goes through json
    {"operations": Items(["\udcff"], lambda item: item), "text": "x"},
    {1: "a non-string key", "operations": Items([{"a": 1}], lambda item: item)},
])
def test_a_streamed_document_is_the_whole_ones_bytes(value: dict[object, object], tmp_path: Path) -> None:
    from harness.ndjson import json_document, write_json_file

    write_json_file(tmp_path / "v.json", value)
    whole = {key: member.made() if isinstance(member, Items) else member for key, member in value.items()}
    assert (tmp_path / "v.json").read_bytes() == json_document(whole)


def test_verdict_json_is_written_an_operation_at_a_time_as_the_whole_document(tmp_path: Path) -> None:
    from harness.engine import judge_run
    from harness.ndjson import json_document

    folder = build(tmp_path / "run", 40)  # every story, so findings, retries, lookups and a key conflict
    result = judge_run(folder, scenario="synthetic", label="-", expect={"effects": {"tickets": 40}}, runs=[],
                       effects=load_evidence(folder).effects, writers=[write_verdict_json])
    assert not result.passed and result.verdict.operations
    assert (folder / "verdict.json").read_bytes() == json_document(result.to_dict())


def test_the_sources_share_their_strings(tmp_path: Path) -> None:
    """An id, a key or a fingerprint the log, the journal and the ledger all hold is one object, not one each."""
    evidence = load_evidence(build(tmp_path / "run", 5))
    attempt = next(e for e in evidence.events if e["event"] == "attempt")
    entry = next(e for e in evidence.journal if e.get("idempotency_key") == attempt["idempotency_key"])
    assert entry["idempotency_key"] is attempt["idempotency_key"]
    assert entry["body_fingerprint"] is attempt["request_fingerprint"]
    assert any(row["payload_fingerprint"] is attempt["request_fingerprint"] for row in evidence.effects)
