"""What saving the traffic files (traffic.har, traffic.mitm) costs: per flow and per scenario run.

    python benchmarks/traffic_cost.py [--requests 1000] [--runs 6] [--json]

- per flow: the harness's proxy process (``ProxyHost``) with the realistic rules of proxy_bench.py and the
  journal on, traffic files on vs off, reconfigured per block of 50 keep-alive ``requests`` POSTs so the two
  share the machine's noise; the median and p99 latency of each, and their difference;
- per scenario: ``run_scenario`` on the catalogue's ``response_lost``, traffic files on vs off (a proxy
  wrapper that drops the two paths), alternated; the median wall time of each;
- the files' size per flow.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_bench import DESTINATION, REALISTIC_RULES  # noqa: E402


def per_flow(requests_total: int, folder: Path) -> dict[str, Any]:
    import requests

    from harness.proxy.host import ProxyHost, free_port

    port = free_port()
    dest = subprocess.Popen([sys.executable, "-c", DESTINATION, str(port)])
    host = ProxyHost()
    host.start()
    try:
        upstream = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                requests.get(upstream, timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        samples: dict[str, list[float]] = {"off": [], "on": []}
        block = 50
        for i in range(requests_total // block):
            for tag in ("off", "on") if i % 2 == 0 else ("on", "off"):
                traffic = {"har_path": folder / f"t{i}.har", "flows_path": folder / f"t{i}.mitm"} if tag == "on" else {}
                routes = host.configure({"tickets": upstream}, REALISTIC_RULES, folder / f"j{tag}{i}.ndjson", **traffic)
                url = routes.urls["tickets"] + "/tickets"
                with requests.Session() as session:
                    session.post(url, json={"warm": True}, timeout=5)
                    for n in range(block):
                        began = time.perf_counter()
                        session.post(url, json={"title": "disk full", "n": n}, timeout=5,
                                     headers={"Idempotency-Key": f"k{i}-{n}", "Authorization": "Bearer sk_test_x"})
                        samples[tag].append(time.perf_counter() - began)
                host.finish()
        har = sum(p.stat().st_size for p in folder.glob("t*.har"))
        mitm = sum(p.stat().st_size for p in folder.glob("t*.mitm"))
        flows = len(samples["on"]) + requests_total // block  # with the warm-up POSTs
    finally:
        host.stop()
        dest.terminate()
        dest.wait(5)

    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        return {"median_ms": statistics.median(xs) * 1000, "p99_ms": xs[int(len(xs) * 0.99) - 1] * 1000}

    off, on = stats(samples["off"]), stats(samples["on"])
    return {"off": off, "on": on, "added_median_ms": on["median_ms"] - off["median_ms"],
            "added_p99_ms": on["p99_ms"] - off["p99_ms"],
            "har_bytes_per_flow": har / flows, "mitm_bytes_per_flow": mitm / flows}


class WithoutTraffic:
    """The shared proxy host, with the traffic paths dropped (the run as it was before them)."""

    def __init__(self, host: Any) -> None:
        self.host = host

    def configure(self, *args: Any, har_path: Any = None, flows_path: Any = None, **kw: Any) -> Any:
        return self.host.configure(*args, **kw)

    def finish(self, *args: Any, **kw: Any) -> Any:
        return self.host.finish(*args, **kw)


def per_scenario(runs: int, folder: Path) -> dict[str, Any]:
    from harness.engine import run_scenario
    from harness.proxy.host import ProxyHost
    from harness.resources import catalogue_dir
    from harness.scenario import load

    scenario = load(catalogue_dir() / "response_lost.yaml")
    host = ProxyHost.shared()
    run_scenario(scenario, evidence_root=folder, proxy=host)  # warm: destinations, proxy, agent imports
    times: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(runs):
        for tag in ("off", "on") if i % 2 == 0 else ("on", "off"):
            began = time.perf_counter()
            result = run_scenario(scenario, evidence_root=folder, proxy=host if tag == "on" else WithoutTraffic(host))
            times[tag].append(time.perf_counter() - began)
            assert result.passed
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    return {"off_s": off, "on_s": on, "added_ms": (on - off) * 1000, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        flow = per_flow(args.requests, Path(tmp))
        scenario = per_scenario(args.runs, Path(tmp) / "evidence")
    out = {"per_flow": flow, "per_scenario": scenario}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"per flow ({args.requests} POSTs each): median {flow['off']['median_ms']:.2f} -> "
              f"{flow['on']['median_ms']:.2f} ms (+{flow['added_median_ms']:.3f} ms), p99 {flow['off']['p99_ms']:.2f} "
              f"-> {flow['on']['p99_ms']:.2f} ms; files {flow['har_bytes_per_flow']:.0f} B (HAR) + "
              f"{flow['mitm_bytes_per_flow']:.0f} B (flows) per flow")
        print(f"per scenario (response_lost, {args.runs} runs each): median {scenario['off_s'] * 1000:.0f} -> "
              f"{scenario['on_s'] * 1000:.0f} ms ({scenario['added_ms']:+.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
