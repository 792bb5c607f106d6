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

