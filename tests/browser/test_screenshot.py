"""The code that makes docs/report-timeline.png works on today's page: it photographs the failing
operation's timeline into a temporary file (`python -m tests.browser.screenshot` writes the one in docs/)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from tests.browser.conftest import FailingRun
from tests.browser.screenshot import DEFAULT_OUT, photograph_timeline


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_timeline_screenshot_is_made_from_the_real_page(browser: Any, failing_run: FailingRun, tmp_path: Path):
    shot = photograph_timeline(browser, failing_run.report, failing_run.operation_id, tmp_path / "timeline.png")
    width, height = png_size(shot)
    assert width >= 400 and height >= 60, (width, height)  # a timeline, not an empty box


def test_the_readme_shows_the_screenshot_kept_in_docs():
    assert DEFAULT_OUT.is_file(), "run `python -m tests.browser.screenshot` to make it"
    png_size(DEFAULT_OUT)
    readme = (DEFAULT_OUT.parents[1] / "README.md").read_text()
    assert "](docs/report-timeline.png)" in readme
