"""The package's public face: complete lazy exports, and a plugin that costs nothing when unused."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fake_destinations
import harness


@pytest.mark.parametrize("package", [harness, fake_destinations], ids=lambda p: p.__name__)
def test_every_public_name_resolves_and_all_is_sorted(package) -> None:
    assert package.__all__ == sorted(package.__all__)
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018


def test_the_plugin_imports_nothing_heavy() -> None:
    """Loaded by every pytest run where the project is installed: mitmproxy, aiohttp, pydantic and
    the checker must wait until a scenario runs."""
    code = ("import sys, harness.pytest_plugin; "
            "heavy = [m for m in ('mitmproxy', 'aiohttp', 'pydantic', 'yaml', 'harness.checker', "
            "'harness.engine', 'requests') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
