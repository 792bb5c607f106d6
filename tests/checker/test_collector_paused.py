"""The cyclic garbage collector is paused while a run is read and judged (harness.limits.collector_paused), so
that checking stays linear in the run's size (benchmarks/check_scale_bench.py), and it always comes back after.
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
    collections: list[int] = []

    def heard(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
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
