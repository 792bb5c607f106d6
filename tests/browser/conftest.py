"""Fixtures of the browser tests: one headless Chromium per test, a fresh context per page,
and the evidence and report of one real failing run, made once per process.

A missing browser fails every test here with the message of `chromium.BrowserMissing` (how to
install it), never a skip.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium import BrowserMissing, Console, chromium, find_chromium, page_in

# a wrong agent: a fresh idempotency key per attempt, so a lost response becomes two tickets
WRONG_AGENT = "python -m harness.agents.wrong.new_key_per_attempt"
SCENARIO = "response_lost"
TIMEOUT_MS = 15_000  # any wait longer than this is a broken page, not a slow one


# One browser per test, closed when the test ends: Playwright's sync API keeps an event loop running in the
# thread while it is started, and the other tests an xdist worker runs next call asyncio.run(), which refuses
# to start inside a running loop. A browser kept for the session broke every such test of its worker.
@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        find_chromium()
    except BrowserMissing as missing:
        message = str(missing)
    else:
        with chromium() as started:
            yield started
        return
    pytest.fail(message, pytrace=False)  # outside the except: the message alone, no chained traceback


OpenPage = Callable[..., tuple[Any, Console]]


@pytest.fixture
def open_page(browser: Any) -> Iterator[OpenPage]:
    """open_page(path_or_url, javascript=True) -> (page, console), loaded; closed after the test."""
    with ExitStack() as stack:

        def open_(target: Path | str, *, javascript: bool = True, **options: Any) -> tuple[Any, Console]:
            page, console = stack.enter_context(page_in(browser, javascript=javascript, **options))
            page.set_default_timeout(TIMEOUT_MS)
            url = target.resolve().as_uri() if isinstance(target, Path) else target
            page.goto(url, wait_until="load")
            return page, console

        yield open_


@dataclass
class FailingRun:
    """One real run of the wrong agent on response_lost, kept, and its HTML report."""

    evidence: Path  # the run's evidence folder
    report: Path  # written by `python -m harness report EVIDENCE --html FILE`
    run_output: str  # what `python -m harness run` printed
    verdict: dict[str, Any]  # the folder's verdict.json

    @property
    def failing_operation(self) -> dict[str, Any]:
        failing = [op for op in self.verdict["operations"] if op["findings"]]
        assert len(failing) == 1, failing
        return failing[0]

    @property
    def operation_id(self) -> str:
        return str(self.failing_operation["operation_id"])

    @property
    def codes(self) -> set[str]:
        return {f["code"] for f in self.failing_operation["findings"]}


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="session")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> FailingRun:
    root = tmp_path_factory.mktemp("failing-run")
    run = harness("run", SCENARIO, "--agent", WRONG_AGENT, "--evidence-dir", str(root / "evidence"), cwd=root)
    assert run.returncode == 1, run.stdout + run.stderr  # the agent is wrong: the run fails
    (folder,) = (root / "evidence").iterdir()
    report = root / "report.html"
    made = harness("report", str(folder), "--html", str(report), cwd=root)
    assert made.returncode in (0, 1), made.stdout + made.stderr  # 1: the report is of a failed run
    assert report.is_file(), made.stdout + made.stderr
    verdict = json.loads((folder / "verdict.json").read_text())
    return FailingRun(evidence=folder, report=report, run_output=run.stdout + run.stderr, verdict=verdict)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.browser)


@dataclass
class MixedRun:
    """A synthetic run of every story (tests/browser/synthetic.py), its report and what the checker said."""

    evidence: Path
    report: Path
    verdict: dict[str, Any]  # `python -m harness check FOLDER --format json`

    def operations(self, *, classification: str | None = None, code: str | None = None) -> set[str]:
        return {op["operation_id"] for op in self.verdict["operations"]
                if (classification is None or op["classification"] == classification)
                and (code is None or code in {f["code"] for f in op["findings"]})}


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> MixedRun:
    from tests.browser.synthetic import build

    root = tmp_path_factory.mktemp("mixed-run")
    folder = build(root / "evidence", 10)
    checked = harness("check", str(folder), "--format", "json", cwd=root)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    report = root / "report.html"
    made = harness("report", str(folder), "--html", str(report), cwd=root)
    assert report.is_file(), made.stdout + made.stderr
    return MixedRun(evidence=folder, report=report, verdict=json.loads(checked.stdout))
