"""Exploration speed: schedules per second with the reference agent, and what the harness adds per
schedule as a ratio to the agent's own run time, both measured in the same run.

Explores a base scenario with the reference agent (a fixed seed, no example database), in this
process, through the warm engine (destination pool and fault proxy started once). For every schedule:
the agent's own run time (the sum of its processes' wall time, crashes included) is the baseline; the
harness's part is everything else: drawing the schedule (Hypothesis), laying it over the scenario,
the proxy's configuration, the destinations' reset, the evidence, the checker. Goal: at most 0.15x.

    python benchmarks/explore_bench.py [--examples 100] [--seed 1] [--scenario response_lost]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness.engine import close_destination_pool, run_scenario
from harness.explore import explore
from harness.resources import catalogue_dir
from harness.scenario import load

GOAL = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", default="response_lost")
    args = parser.parse_args()
    base = load(catalogue_dir() / f"{args.scenario}.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        run_scenario(base, evidence_root=Path(tmp) / "warm-up", keep_evidence="failed")  # start-up, once
        state = explore(base, agent="python -m harness.agents.reference", evidence_root=Path(tmp),
                        examples=args.examples, seed=args.seed, database=None)
    close_destination_pool()
    if not state.runs or not state.agent_seconds:
        print("no schedule ran", file=sys.stderr)
        return 1
    engine = state.run_seconds - state.agent_seconds  # per run: proxy, destinations, evidence, checker
    search = state.seconds - state.run_seconds  # drawing, applying, the cache, shrinking bookkeeping
    overhead = (state.seconds - state.agent_seconds) / state.agent_seconds
    print(f"{state.runs} schedules of {args.scenario} in {state.seconds:.1f} s: {state.runs / state.seconds:.2f} "
          f"schedules/s ({state.seconds / state.runs * 1000:.0f} ms each; outcome: "
          f"{'failures found' if state.failed else 'no failure'})")
    print(f"  the agent's own run time  {state.agent_seconds / state.runs * 1000:7.1f} ms per schedule (baseline)")
    print(f"  the engine around it      {engine / state.runs * 1000:7.1f} ms per schedule")
    print(f"  the search (Hypothesis)   {search / state.runs * 1000:7.1f} ms per schedule")
    print(f"  harness overhead / agent: {overhead:.3f}x (goal <= {GOAL}x: {'met' if overhead <= GOAL else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
