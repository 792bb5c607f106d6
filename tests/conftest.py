"""The whole suite's settings: the runs' keys (harness.chain.key_store) go to a folder of the session's, never the
user's ~/.cache; the longest modules run first."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from harness.contract import KEY_STORE_ENV

if KEY_STORE_ENV not in os.environ:  # made here, so removed here (a worker or a subprocess inherits it)
    import atexit
    import shutil

    _made = tempfile.mkdtemp(prefix="retry-harness-test-keys-")
    os.environ[KEY_STORE_ENV] = _made
    atexit.register(shutil.rmtree, _made, True)


# ------------------------------------------------------------------------------------ the longest modules first
# What is left to lose with `--dist worksteal` is the tail: a 170 s test started last ends 170 s after everything
# else. worksteal hands each of the N workers a contiguous slice of the collection (the first N-th of the tests, the
# second...), runs each slice in order, and a free worker takes the back half of the longest queue. So the modules
# are dealt into N lanes of a slice's size each, longest first, each to the lane with the fewest seconds so far that
# still has room for it: the N longest modules head the N slices (each starts at once on a worker of its own) and the
# slices hold about the same seconds. The seconds are what benchmarks/suite_durations.py measured for each module
# (tests/durations.json, rewritten with --write-durations); a module not measured yet counts as the longest, since
# nothing says it is short. A module's tests stay together and in their order, and every worker sorts alike (xdist
# requires the same collection on each).
DURATIONS_FILE = Path(__file__).with_name("durations.json")


def longest_first(items: list[pytest.Item], seconds: dict[str, float], root: Path, workers: int = 1) -> None:
    """Order ``items`` in place for ``workers`` slices, as said above (one worker: the modules longest first;
    ``seconds`` keys are module paths relative to ``root``)."""
    def module(item: pytest.Item) -> str:
        return item.path.relative_to(root).as_posix() if root in item.path.parents else str(item.path)

    tests: dict[str, list[pytest.Item]] = {}
    for item in items:
        tests.setdefault(module(item), []).append(item)
    unknown = max(seconds.values(), default=0.0) + 1.0
    modules = sorted(tests, key=lambda name: -seconds.get(name, unknown))  # stable: ties keep collection order
    room = [(lane + 1) * len(items) // workers - lane * len(items) // workers for lane in range(workers)]
    lanes: list[list[str]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for name in modules:  # where it fits whole (so the slices begin where the lanes do), else where most room is
        fits = [n for n in range(workers) if room[n] >= len(tests[name])]
        lane = min(fits, key=lambda n: load[n]) if fits else max(range(workers), key=lambda n: room[n])
        lanes[lane].append(name)
        load[lane] += seconds.get(name, unknown)
        room[lane] -= len(tests[name])
    items[:] = [item for lane in lanes for name in lane for item in tests[name]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if DURATIONS_FILE.is_file():
        workers = getattr(config, "workerinput", {}).get("workercount", 1)
        longest_first(items, json.loads(DURATIONS_FILE.read_text(encoding="utf-8")), DURATIONS_FILE.parent.parent,
                      workers)
