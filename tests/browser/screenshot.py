"""Regenerate docs/report-timeline.png, the README's picture of one operation's timeline: a real run of
the wrong agent that mints a key per attempt on response_lost, its report, and the timeline of its
failing operation photographed in headless Chromium.

    python -m tests.browser.screenshot [--out docs/report-timeline.png]

tests/browser/test_screenshot.py runs the same code into a temporary file on every test run (it is
cheap: the browser is already up), so this script cannot rot; the picture in docs/ changes only when
someone runs it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.browser.chromium import chromium, page_in

SCENARIO = "response_lost"
AGENT = "python -m harness.agents.wrong.new_key_per_attempt"
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "report-timeline.png"
VIEWPORT = {"width": 1100, "height": 900}


def failing_report(root: Path) -> tuple[Path, str]:
    """Run the scenario into root/evidence, write root/report.html; returns it and the failing operation's id."""
    subprocess.run([sys.executable, "-m", "harness", "run", SCENARIO, "--agent", AGENT, "--evidence-dir",
                    str(root / "evidence")], cwd=root, capture_output=True, text=True, timeout=120)
    (folder,) = (root / "evidence").iterdir()
    report = root / "report.html"
    made = subprocess.run([sys.executable, "-m", "harness", "report", str(folder), "--html", str(report)],
                          cwd=root, capture_output=True, text=True, timeout=120)
    if not report.is_file():
        raise RuntimeError(f"no report written: {made.stdout}{made.stderr}")
    verdict = json.loads((folder / "verdict.json").read_text())
    (operation,) = [op for op in verdict["operations"] if op["findings"]]
    return report, str(operation["operation_id"])


def photograph_timeline(browser: Any, report: Path, operation_id: str, out: Path) -> Path:
    """A PNG of the operation's timeline table (its lanes and gaps), at a readable width."""
    with page_in(browser, viewport=VIEWPORT, device_scale_factor=1) as (page, console):
        page.goto(report.resolve().as_uri(), wait_until="load")
        timeline = page.locator(f"section.operation#op-{operation_id} table.timeline")
        timeline.scroll_into_view_if_needed()
        timeline.screenshot(path=str(out), animations="disabled")
        if console.errors:
            raise RuntimeError(f"{report}: {console.errors}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="report-shot-") as tmp, chromium() as browser:
        report, operation_id = failing_report(Path(tmp))
        photograph_timeline(browser, report, operation_id, args.out)
    print(f"{args.out}: timeline of {operation_id} ({SCENARIO}, {AGENT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
