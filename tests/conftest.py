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
# The suite is mostly waiting (scenario clocks, framework agents, containers, a JVM), so it runs with more xdist
# workers than cores, and `--dist worksteal` hands a free worker half of a busy one's queue. What is left to lose
# is the tail: a 90 s module started last finishes 90 s after everything else. So modules run longest first, by
# the seconds benchmarks/suite_durations.py measured for each (tests/durations.json, rewritten with --write-
# durations); a module not measured yet runs before them all, since nothing says it is short. Within a module the
# order is kept, and every worker sorts alike (xdist requires the same collection on each).
DURATIONS_FILE = Path(__file__).with_name("durations.json")


def longest_first(items: list[pytest.Item], seconds: dict[str, float], root: Path) -> None:
    """Sort ``items`` in place: modules not in ``seconds`` (paths relative to ``root``) first, then the others by
    their seconds, longest first; stable, so a module's tests stay together and in their order."""
    def module(item: pytest.Item) -> str:
        return item.path.relative_to(root).as_posix() if root in item.path.parents else str(item.path)

    items.sort(key=lambda item: -seconds.get(module(item), float("inf")))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if DURATIONS_FILE.is_file():
        longest_first(items, json.loads(DURATIONS_FILE.read_text(encoding="utf-8")), DURATIONS_FILE.parent.parent)
