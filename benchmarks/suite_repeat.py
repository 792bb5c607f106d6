"""The whole suite N times in a row: a flaky test shows up as a failed run.

    python benchmarks/suite_repeat.py [--runs 10] [-- PYTEST ARGS...]   (default pytest args: -n 2 -q)

Prints one line per run (exit status, seconds, the summary line pytest printed, the failed tests)
and a last line with how many runs failed. Exit status 1 when any run failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    parser.add_argument("pytest_args", nargs="*", default=["-n", "2", "-q"])
    args = parser.parse_args(argv)
    failed = 0
    for run in range(1, args.runs + 1):
        began = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args.pytest_args],
                                  cwd=ROOT, capture_output=True, text=True, timeout=args.timeout)
            code, out = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired:
            code, out = -1, f"timed out after {args.timeout:g} s"
        seconds = time.perf_counter() - began
        summary = next((line.strip("= ") for line in reversed(out.splitlines()) if line.strip()), "")
        failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
        failed += code != 0
        listed = f" [{', '.join(failures)}]" if failures else ""
        print(f"run {run}: exit {code} in {seconds:.0f} s: {summary}{listed}", flush=True)
    print(f"{failed} of {args.runs} runs failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
