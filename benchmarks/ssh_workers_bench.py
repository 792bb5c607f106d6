"""The whole catalogue over two remote workers reached by ssh, against two popen workers, in the same run:
`python benchmarks/ssh_workers_bench.py [--rounds N]`.

Starts two sshd containers with the harness installed at paths of their own (harness.containers.ssh_workers; the
image built or found first, its start timed apart), then runs `pytest --scenario all` with the bundled reference
agent over `--tx popen --tx popen` and over the two `--tx ssh=...`, alternating, N rounds after one warm-up of each,
and prints the median wall time of each and the ratio. Every run must pass every scenario, and over ssh every
run's evidence folder must be back in the controller's evidence root: a benchmark of failing runs measures nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.containers.images import ensure_ssh_worker_image  # noqa: E402
from harness.containers.ssh_workers import SSHWorkers  # noqa: E402
from harness.resources import catalogue  # noqa: E402

INSTALLS = ["/opt/ci-a/venv", "/srv/worker-b/env"]
RUN_TIMEOUT = 1800.0


def run_catalogue(tx: list[str], folder: Path) -> float:
    evidence = Path(tempfile.mkdtemp(prefix="evidence-", dir=folder))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "xdist", "-q",
                           *[a for spec in tx for a in ("--tx", spec)], "--dist", "load", "--scenario=all",
                           f"--evidence-dir={evidence}"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    seconds = time.perf_counter() - began
    count = len(catalogue())
    if done.returncode != 0 or not re.search(rf"\b{count} passed\b", done.stdout):
        sys.exit(f"the catalogue over {tx} did not pass all {count} scenarios (exit {done.returncode}):\n"
                 f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    folders = [p for p in evidence.iterdir() if p.is_dir()]
    if len(folders) != count:
        sys.exit(f"{len(folders)} evidence folder(s) in {evidence}, expected {count}")
    return seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    print(f"ssh worker image {ensure_ssh_worker_image()} ready in {time.perf_counter() - began:.1f} s")
    with tempfile.TemporaryDirectory(prefix="ssh-bench-") as root:
        folder = Path(root)
        began = time.perf_counter()
        with SSHWorkers(INSTALLS) as workers:
            print(f"2 ssh workers started and installed in {time.perf_counter() - began:.1f} s")
            kinds = {"popen": ["popen", "popen"], "ssh": workers.tx_specs()}
            seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
            for round_ in range(args.rounds + 1):  # the first of each kind warms up, and is not counted
                for kind, tx in kinds.items():
                    took = run_catalogue(tx, folder)
                    print(f"  round {round_} {kind:5} {took:6.1f} s{' (warm-up)' if not round_ else ''}", flush=True)
                    if round_:
                        seconds[kind].append(took)
    popen, ssh = (statistics.median(seconds[kind]) for kind in ("popen", "ssh"))
    print(f"pytest --scenario all ({len(catalogue())} scenarios), 2 workers, median of {args.rounds} round(s), "
          f"alternating: popen {popen:.1f} s, ssh {ssh:.1f} s, ssh/popen {ssh / popen:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
