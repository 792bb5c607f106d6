"""Container start-up per scenario, against a process agent's, in the same run:
`python benchmarks/container_startup_bench.py [--runs N] [--scenario NAME]`.

Runs the scenario (default response_lost) with the bundled reference agent as a process and as a container of
the runtime image (`python3 -m harness.agents.reference` in it), alternating, after one warm-up of each (the
image is built or found first, the proxy and the destination pool are warm), and prints per kind the median of
the agent phase (start to exit: what the container adds) and of the whole scenario, with the ratio. Every run
must pass: a benchmark of failing runs measures nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.containers import images  # noqa: E402
from harness.engine import close_destination_pool, run_scenario  # noqa: E402
from harness.resources import catalogue_dir  # noqa: E402
from harness.scenario import ContainerAgent, load  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--scenario", default="response_lost")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    image = images.ensure_runtime_image()
    print(f"runtime image {image} ready in {time.perf_counter() - began:.1f} s")
    scenario = load(catalogue_dir() / f"{args.scenario}.yaml")
    kinds = {"process": None,
             "container": ContainerAgent(image=image, command=["python3", "-m", "harness.agents.reference"])}
    agent_phase: dict[str, list[float]] = {k: [] for k in kinds}
    whole: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        with tempfile.TemporaryDirectory() as root:
            for i in range(args.runs + 1):  # the first of each kind warms up, and is not counted
                for kind, agent in kinds.items():
                    t0 = time.perf_counter()
                    result = run_scenario(scenario, agent=agent, evidence_root=Path(root), keep_evidence="failed")
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
        print(f"  {kind:9}  agent phase {statistics.median(agent_phase[kind]):.2f} s "
              f"(min {min(agent_phase[kind]):.2f}, max {max(agent_phase[kind]):.2f}), "
              f"whole scenario {statistics.median(whole[kind]):.2f} s")
    ratio = statistics.median(agent_phase["container"]) / statistics.median(agent_phase["process"])
    extra = statistics.median(whole["container"]) - statistics.median(whole["process"])
    print(f"  container / process: {ratio:.2f}x the agent phase; +{extra:.2f} s per scenario")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
