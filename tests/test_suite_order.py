"""The suite runs its longest modules first (tests/conftest.py, issue 47): a module the durations file does not
know yet goes before them all, the known ones longest first, each module's tests together and in their order."""

from __future__ import annotations

import pytest

from tests.conftest import longest_first


def test_modules_run_unknown_first_then_longest_first_each_kept_whole(pytester: pytest.Pytester) -> None:
    for name in ("test_short", "test_long", "test_new", "test_middle"):
        pytester.makepyfile(**{name: "def test_one(): pass\ndef test_two(): pass\n"})
    items, _ = pytester.inline_genitems()
    assert [i.path.stem for i in items][::2] == ["test_long", "test_middle", "test_new", "test_short"]  # by name

    longest_first(items, {"test_short.py": 1.5, "test_long.py": 90.0, "test_middle.py": 12.0}, pytester.path)

    assert [f"{i.path.stem}::{i.name}" for i in items] == [
        "test_new::test_one", "test_new::test_two", "test_long::test_one", "test_long::test_two",
        "test_middle::test_one", "test_middle::test_two", "test_short::test_one", "test_short::test_two"]



def test_with_workers_the_longest_modules_head_the_slices_worksteal_hands_out(pytester: pytest.Pytester) -> None:
    """worksteal gives each of N workers a contiguous N-th of the tests: the N longest modules begin those slices,
    and the shorter ones fill the slice with the fewest seconds so far (before: all the longest in the first slice,
    the Spark audit then stolen from its end and run last)."""
    for name in ("test_a", "test_b", "test_c", "test_d"):
        pytester.makepyfile(**{name: "def test_one(): pass\ndef test_two(): pass\n"})
    items, _ = pytester.inline_genitems()

    longest_first(items, {"test_a.py": 90.0, "test_b.py": 60.0, "test_c.py": 10.0, "test_d.py": 5.0},
                  pytester.path, workers=2)

    order = [i.path.stem for i in items]
    assert order[:4] == ["test_a", "test_a", "test_d", "test_d"]  # the first worker's slice: 95 s
    assert order[4:] == ["test_b", "test_b", "test_c", "test_c"]  # the second's: 70 s
