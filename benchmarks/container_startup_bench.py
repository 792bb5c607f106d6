"""Container start-up per scenario, against a process agent's, in the same run:
`python benchmarks/container_startup_bench.py [--runs N] [--scenario NAME]`.

Runs the scenario (default response_lost) with the bundled reference agent as a process and as a container of
the runtime image (`python3 -m harness.agents.reference` in it), alternating, after one warm-up of each (the
image is built or found first, the proxy and the destination pool are warm), and prints per kind the median of
the agent phase (start to exit: what the container adds) and of the whole scenario, with the ratio. Every run
must pass: a benchmark of failing runs measures nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.alternating import arguments, compare  # noqa: E402
from harness.containers import images  # noqa: E402
from harness.scenario import ContainerAgent  # noqa: E402


def main(argv: list[str]) -> int:
    args = arguments(__doc__, argv, runs=7)
    began = time.perf_counter()
    image = images.ensure_runtime_image()
    print(f"runtime image {image} ready in {time.perf_counter() - began:.1f} s")
    kinds = {"process": None,
             "container": ContainerAgent(image=image, command=["python3", "-m", "harness.agents.reference"])}
    return compare(args, {kind: {"agent": agent} for kind, agent in kinds.items()}, kind="container",
                   baseline="process")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
