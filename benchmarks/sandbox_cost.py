"""The sandbox's cost per scenario, against an unsandboxed run in the same run:
`python benchmarks/sandbox_cost.py [--runs N] [--scenario NAME]`.

Runs the scenario (default response_lost) with the bundled reference agent in bubblewrap and unsandboxed
(``sandbox="off"``), alternating, after one warm-up of each (the proxy and the destination pool warm), and
prints per kind the median of the agent phase (start to exit and teardown of its processes: what the sandbox
adds) and of the whole scenario, with the ratios. Every run must pass: a benchmark of failing runs measures
nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.alternating import arguments, compare  # noqa: E402
from harness.sandbox import choose_sandbox  # noqa: E402


def main(argv: list[str]) -> int:
    args = arguments(__doc__, argv, runs=9)
    print(choose_sandbox("bwrap").description)
    return compare(args, {kind: {"sandbox": kind} for kind in ("bwrap", "off")}, kind="bwrap", baseline="off")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
