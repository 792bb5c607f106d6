"""Harness overhead per scenario: wall time from start to verdict minus the agent's own run.

Runs `response_lost` with the reference agent N times in one process, alternating three setups so
all see the same machine noise:
  cold     - a fresh destination pool for every run (a destination process started per scenario),
  warm     - the process-wide warm pool (destinations reset, proxy listeners reused),
  embedded - warm, but the proxy embedded in this process (``ProxyServer``, how it ran before it
             moved to a process of its own; needs mitmproxy installed here): the baseline for the
             proxy process's cost per scenario.
cold and warm share the harness's proxy process (``ProxyHost.shared()``).
Prints medians and p90 of the overhead, the cold/warm ratio and the warm/embedded ratio.

    python benchmarks/scenario_overhead.py [--runs 20] [--scenario response_lost]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fake_destinations.host import DestinationPool
from harness.engine import close_destination_pool, run_scenario
from harness.proxy.server import ProxyServer
from harness.report import render_result
from harness.resources import catalogue_dir
from harness.scenario import load


def overhead(scenario, root: Path, cold: bool = False, proxy=None) -> float:
    began = time.perf_counter()
    pool = DestinationPool(root / "cold-pool") if cold else None
    try:
        result = run_scenario(scenario, evidence_root=root, pool=pool, proxy=proxy)
    finally:
        if pool is not None:
            pool.close()  # stopping the process is part of the cold cost
    total = time.perf_counter() - began
    assert result.passed, render_result(result)
    return total - sum(run.seconds for run in result.agent_runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--scenario", default="response_lost")
    args = parser.parse_args()
    scenario = load(catalogue_dir() / f"{args.scenario}.yaml")
    cold: list[float] = []
    warm: list[float] = []
    embedded: list[float] = []
    with tempfile.TemporaryDirectory(prefix="overhead-bench-") as tmp:
        root = Path(tmp)
        server = ProxyServer(confdir=root / "mitm")
        server.start()
        overhead(scenario, root)  # warm-up: the proxy process, the first pool process
        overhead(scenario, root, proxy=server)
        for _ in range(args.runs):
            cold.append(overhead(scenario, root, cold=True))
            warm.append(overhead(scenario, root))
            embedded.append(overhead(scenario, root, proxy=server))
        close_destination_pool()
        server.stop()

    def line(name: str, values: list[float]) -> str:
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else values[0]
        return f"{name:8} median {statistics.median(values) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms"

    print(f"harness overhead of scenario {args.scenario} (start to verdict minus agent), {args.runs} runs each")
    print(line("cold", cold))
    print(line("warm", warm))
    print(line("embedded", embedded))
    print(f"cold/warm ratio: {statistics.median(cold) / statistics.median(warm):.2f}x  "
          f"(goal: warm median under 150 ms)")
    print(f"warm/embedded ratio (the proxy's own process vs embedded): "
          f"{statistics.median(warm) / statistics.median(embedded):.2f}x  (goal: within 1.15x)")


if __name__ == "__main__":
    main()
