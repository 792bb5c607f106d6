"""The sandbox's cost per scenario, against an unsandboxed run in the same run:
`python benchmarks/sandbox_cost.py [--runs N] [--scenario NAME]`.

Runs the scenario (default response_lost) with the bundled reference agent in bubblewrap and unsandboxed
(``sandbox="off"``), alternating, after one warm-up of each (the proxy and the destination pool warm), and
prints per kind the median of the agent phase (start to exit and teardown of its processes: what the sandbox
adds) and of the whole scenario, with the ratios. Every run must pass: a benchmark of failing runs measures
nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engine import close_destination_pool, run_scenario  # noqa: E402
from harness.resources import catalogue_dir  # noqa: E402
from harness.sandbox import choose_sandbox  # noqa: E402
from harness.scenario import load  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--scenario", default="response_lost")
    args = parser.parse_args(argv)
    print(choose_sandbox("bwrap").description)
    scenario = load(catalogue_dir() / f"{args.scenario}.yaml")
    kinds = ("bwrap", "off")  # "off" is the baseline
    agent_phase: dict[str, list[float]] = {k: [] for k in kinds}
    whole: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        with tempfile.TemporaryDirectory() as root:
            for i in range(args.runs + 1):  # the first of each kind warms up, and is not counted
                for kind in kinds if i % 2 else reversed(kinds):  # neither always first
                    t0 = time.perf_counter()
                    result = run_scenario(scenario, evidence_root=Path(root), keep_evidence="failed", sandbox=kind)
                    seconds = time.perf_counter() - t0
                    if not result.passed:
                        print(f"{kind} run {i} did not pass: {result.evidence_dir}", file=sys.stderr)
                        return 1
                    if i:
                        agent_phase[kind].append(result.timings["agent"])
                        whole[kind].append(seconds)
    finally:
        close_destination_pool()
    print(f"{args.scenario}, reference agent, median of {args.runs} runs each, alternating:")
    for kind in kinds:
        print(f"  {kind:6} agent phase {statistics.median(agent_phase[kind]) * 1000:.0f} ms "
              f"(min {min(agent_phase[kind]) * 1000:.0f}, max {max(agent_phase[kind]) * 1000:.0f}), "
              f"whole scenario {statistics.median(whole[kind]) * 1000:.0f} ms")
    phase = statistics.median(agent_phase["bwrap"]) / statistics.median(agent_phase["off"])
    total = statistics.median(whole["bwrap"]) / statistics.median(whole["off"])
    extra = statistics.median(whole["bwrap"]) - statistics.median(whole["off"])
    print(f"sandbox / unsandboxed: agent phase {phase:.2f}x, whole scenario {total:.2f}x ({extra * 1000:+.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
