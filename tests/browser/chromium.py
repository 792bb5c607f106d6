"""The one place that starts a browser for the browser tests, the render benchmark and the screenshot
script: Debian's `chromium`, headless, driven by Playwright (`playwright` in the test extra, its own
browser downloads never used: `executable_path` points at the system binary).

`HARNESS_CHROMIUM` names another binary. No binary is an error that says how to get one, never a
skip: `.ci/run` installs `chromium` when it is missing (as root, with apt-get), so a browser test that
cannot start its browser is a broken machine, not a test to leave out.

Every browser started here is closed on the way out of `chromium()`, whatever raised inside it, and
Playwright's driver process with it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page

# headless on a server: no sandbox (root in a container), no GPU, nothing that phones home or updates itself
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]
ENV_BINARY = "HARNESS_CHROMIUM"
CANDIDATES = ("chromium", "chromium-browser")


class BrowserMissing(RuntimeError):
    """Raised when no Chromium binary is found (neither HARNESS_CHROMIUM nor `chromium` on PATH)."""


def find_chromium() -> str:
    given = os.environ.get(ENV_BINARY)
    if given:
        if not Path(given).is_file():
            raise BrowserMissing(f"{ENV_BINARY}={given}: no such file; unset it or name a Chromium binary")
        return given
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserMissing(
        "the browser tests need Debian's chromium, and none is on PATH: install it with "
        "`apt-get update && apt-get install -y chromium` (.ci/run does so when it runs as root), "
        f"or set {ENV_BINARY} to a Chromium binary")


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed (with Playwright's driver) when the block ends, also on an error."""
    from playwright.sync_api import sync_playwright

    binary = find_chromium()
    manager = sync_playwright()
    playwright = manager.start()
    try:
        browser = playwright.chromium.launch(executable_path=binary, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        manager.__exit__(None, None, None)


@dataclass
class Console:
    """What a page said: console messages (type, text, location) and uncaught errors."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page fetched, itself included
    failed_requests: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        def on_console(message: ConsoleMessage) -> None:
            where = message.location or {}
            self.messages.append((message.type, message.text, f"{where.get('url', '')}:{where.get('lineNumber', '')}"))

        page.on("console", on_console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("requestfailed", lambda request: self.failed_requests.append(request.url))

    @property
    def remote_requests(self) -> list[str]:
        """What a self-contained page must never fetch: anything not in its own folder."""
        return [url for url in self.requests if not url.startswith(("file:", "data:", "about:"))]

    @property
    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions: what a clean page never has."""
        return ([f"console.{kind}: {text} ({where})" for kind, text, where in self.messages if kind == "error"]
                + [f"uncaught: {text}" for text in self.page_errors])


@contextmanager
def page_in(browser: Browser, *, javascript: bool = True, **options: Any) -> Iterator[tuple[Page, Console]]:
    """A page in a fresh context (its own storage), with its console collected; the context is closed after."""
    context: BrowserContext = browser.new_context(java_script_enabled=javascript, **options)
    try:
        page = context.new_page()
        console = Console()
        console.attach(page)
        yield page, console
    finally:
        context.close()
