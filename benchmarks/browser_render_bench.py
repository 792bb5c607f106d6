"""Benchmark the HTML report in a real browser: time to first render of reports of growing size.

    python benchmarks/browser_render_bench.py [--operations 100 1000 10000] [--loads 5] [--json]

For each size it writes a synthetic log of that many operations (tests/browser/synthetic.py: clean
creates, lost responses reconciled, dedup retries, blind retries, key conflicts), audits it into an
HTML report (`python -m harness audit LOG --html FILE`, timed: the report's generation), and opens the
report's first file in headless Chromium (Debian's, through Playwright: tests/browser/chromium.py)
`--loads` times, each in a fresh context. It reports the medians of the browser's own clocks from
navigation start: first contentful paint, DOMContentLoaded and load, the time for a classification
filter to repaint, the first file's size and that of all its pages, and each figure as a multiple of
the first (smallest) size's, measured in the same run. Everything is made in a temporary folder,
removed at the end; the browser is closed also on an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.browser.chromium import chromium  # noqa: E402 -- after the path is set
from tests.browser.timing import audit_report, measure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="render-bench-") as tmp, chromium() as browser:
        for n in args.operations:
            root = Path(tmp) / str(n)
            root.mkdir()
            start = time.perf_counter()
            report = audit_report(root, n)
            generated = time.perf_counter() - start
            pages = list(report.parent.glob(f"{report.stem}*.html"))
            timing = measure(browser, report, loads=args.loads, filter_value="key_conflict")
            rows.append({"operations": n, "generate_s": round(generated, 2), "files": len(pages),
                         "first_file_kb": round(report.stat().st_size / 1024),
                         "all_files_kb": round(sum(p.stat().st_size for p in pages) / 1024), **timing.as_dict()})
    base = rows[0]
    for row in rows:
        for key in ("fcp_ms", "dcl_ms", "filter_ms"):
            row[f"{key[:-3]}_x"] = round(row[key] / base[key], 2) if base[key] else None
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"median of {args.loads} loads each, headless Chromium; x = multiple of the {base['operations']}-operation "
          "report's figure, same run")
    print(f"{'operations':>10} {'generate':>9} {'files':>5} {'first KB':>8} {'all KB':>8} {'rows':>5} "
          f"{'FCP ms':>8} {'x':>5} {'DCL ms':>8} {'x':>5} {'load ms':>8} {'filter ms':>9} {'x':>5}")
    for r in rows:
        print(f"{r['operations']:>10} {r['generate_s']:>8.2f}s {r['files']:>5} {r['first_file_kb']:>8} "
              f"{r['all_files_kb']:>8} {r['rows']:>5} {r['fcp_ms']:>8} {r['fcp_x']:>5} {r['dcl_ms']:>8} "
              f"{r['dcl_x']:>5} {r['load_ms']:>8} {r['filter_ms']:>9} {r['filter_x']:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
