"""One scenario run in several ways, alternating in one run, each after a warm-up: what the benchmarks that
compare a way of running the agent against a baseline share (``container_startup_bench``, ``sandbox_cost``)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.engine import close_destination_pool, run_scenario
from harness.scenario import Scenario


def arguments(doc: str, argv: list[str], *, runs: int) -> argparse.Namespace:
    """``--runs N`` (default ``runs``) and ``--scenario NAME`` (default response_lost), described by ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--scenario", default="response_lost")
    return parser.parse_args(argv)


def alternate(scenario: Scenario, kinds: Mapping[str, Mapping[str, Any]], runs: int
              ) -> tuple[dict[str, list[float]], dict[str, list[float]]] | None:
    """Per kind (its ``run_scenario`` keyword arguments), the agent phase's and the whole scenario's seconds of
    ``runs`` runs, after one warm-up of each (not counted); the kinds' order turns each round, so none is
    always first. None (said on stderr) when a run did not pass: a benchmark of failing runs measures nothing."""
    agent_phase: dict[str, list[float]] = {k: [] for k in kinds}
    whole: dict[str, list[float]] = {k: [] for k in kinds}
    names = list(kinds)
    try:
        with tempfile.TemporaryDirectory() as root:
            for i in range(runs + 1):
                for kind in names[i % len(names):] + names[:i % len(names)]:
                    t0 = time.perf_counter()
                    result = run_scenario(scenario, evidence_root=Path(root), keep_evidence="failed", **kinds[kind])
                    seconds = time.perf_counter() - t0
                    if not result.passed:
                        print(f"{kind} run {i} did not pass: {result.evidence_dir}", file=sys.stderr)
                        return None
                    if i:
                        agent_phase[kind].append(result.timings["agent"])
                        whole[kind].append(seconds)
    finally:
        close_destination_pool()
    return agent_phase, whole


def report(scenario: str, runs: int, agent_phase: dict[str, list[float]], whole: dict[str, list[float]], *,
           kind: str, baseline: str) -> None:
    """Each kind's medians (agent phase with its spread, whole scenario), then ``kind`` against ``baseline``."""
    print(f"{scenario}, reference agent, median of {runs} runs each, alternating:")
    for name in agent_phase:
        print(f"  {name:9} agent phase {statistics.median(agent_phase[name]) * 1000:.0f} ms "
              f"(min {min(agent_phase[name]) * 1000:.0f}, max {max(agent_phase[name]) * 1000:.0f}), "
              f"whole scenario {statistics.median(whole[name]) * 1000:.0f} ms")
    phase = statistics.median(agent_phase[kind]) / statistics.median(agent_phase[baseline])
    total = statistics.median(whole[kind]) / statistics.median(whole[baseline])
    extra = statistics.median(whole[kind]) - statistics.median(whole[baseline])
    print(f"  {kind} / {baseline}: agent phase {phase:.2f}x, whole scenario {total:.2f}x ({extra * 1000:+.0f} ms)")


def compare(args: argparse.Namespace, kinds: Mapping[str, Mapping[str, Any]], *, kind: str, baseline: str) -> int:
    """The script's whole measure: ``args.scenario`` run ``args.runs`` times each way (``alternate``), then
    ``report``; its exit status (1 when a run did not pass)."""
    from harness.resources import catalogue_dir
    from harness.scenario import load

    measured = alternate(load(catalogue_dir() / f"{args.scenario}.yaml"), kinds, args.runs)
    if measured is None:
        return 1
    report(args.scenario, args.runs, *measured, kind=kind, baseline=baseline)
    return 0
