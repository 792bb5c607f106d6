"""Render timing of a report page in Chromium, for the size test and benchmarks/browser_render_bench.py:
the browser's own clocks (Navigation Timing and Paint Timing), each load in a fresh context, so neither
a cache nor a warm page helps the next one."""

from __future__ import annotations

import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.browser.chromium import page_in

# resolves once the first contentful paint is known (buffered: it may have happened already)
FIRST_PAINT_JS = """() => new Promise(resolve => {
    const done = entries => {
        const fcp = entries.find(e => e.name === 'first-contentful-paint');
        if (fcp) { resolve(fcp.startTime); return true; }
        return false;
    };
    if (done(performance.getEntriesByType('paint'))) return;
    new PerformanceObserver(list => done(list.getEntries())).observe({type: 'paint', buffered: true});
    setTimeout(() => resolve(null), 10000);
})"""
NAVIGATION_JS = """() => {
    const nav = performance.getEntriesByType('navigation')[0];
    return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
            rows: document.querySelectorAll('table#operations tr.operation').length};
}"""
# a filter choice, timed until the browser has laid out and painted the result (the frame after it)
FILTER_JS = """async ([selector, value]) => {
    const select = document.querySelector(selector);
    const start = performance.now();
    select.value = value;
    select.dispatchEvent(new Event('change', {bubbles: true}));
    await new Promise(resolve => requestAnimationFrame(() => setTimeout(resolve, 0)));
    return performance.now() - start;
}"""


@dataclass
class Timing:
    """Median milliseconds over the loads, from navigation start."""

    first_contentful_paint: float
    dom_content_loaded: float
    load: float
    filter: float | None  # choosing a classification in #filter-classification, to the next frame
    rows: int  # index rows on the first page
    loads: int

    def as_dict(self) -> dict[str, Any]:
        return {"fcp_ms": round(self.first_contentful_paint, 1), "dcl_ms": round(self.dom_content_loaded, 1),
                "load_ms": round(self.load, 1), "filter_ms": None if self.filter is None else round(self.filter, 1),
                "rows": self.rows, "loads": self.loads}


def measure(browser: Any, report: Path, *, loads: int = 3, filter_value: str | None = None) -> Timing:
    fcps, dcls, ends, filters = [], [], [], []
    rows = 0
    for _ in range(loads):
        with page_in(browser) as (page, console):
            page.goto(report.resolve().as_uri(), wait_until="load")
            fcp = page.evaluate(FIRST_PAINT_JS)
            nav = page.evaluate(NAVIGATION_JS)
            if fcp is None:
                raise AssertionError(f"{report}: no first-contentful-paint entry within 10 s")
            fcps.append(fcp)
            dcls.append(nav["dcl"])
            ends.append(nav["load"])
            rows = nav["rows"]
            if filter_value is not None:
                filters.append(page.evaluate(FILTER_JS, ["#filter-classification", filter_value]))
            if console.errors:
                raise AssertionError(f"{report}: {console.errors}")
    return Timing(statistics.median(fcps), statistics.median(dcls), statistics.median(ends),
                  statistics.median(filters) if filters else None, rows, loads)


def audit_report(root: Path, operations: int) -> Path:
    """A synthetic log of `operations` operations, audited offline into `root/report.html` (and its pages)."""
    from tests.browser.synthetic import build

    folder = build(root / "evidence", operations)
    report = root / "report.html"
    made = subprocess.run([sys.executable, "-m", "harness", "audit", str(folder / "agent.ndjson"), "--html",
                           str(report)], capture_output=True, text=True, timeout=600)
    if not report.is_file():
        raise AssertionError(f"audit --html wrote no {report}: {made.stdout}{made.stderr}")
    return report
