"""Where the whole suite's time goes: by directory and by kind, wall time against CPU time (issue 47).

    python benchmarks/suite_durations.py [--top 20] [-- PYTEST ARGS...]   (default pytest args: -n 2)
    python benchmarks/suite_durations.py --from FOLDER                      (a folder an earlier run wrote)
    ... --write-durations tests/durations.json     (also write each module's seconds: the suite runs them longest first)

Runs pytest with benchmarks/suite_timing_plugin.py, which writes each test's wall time and CPU time (its worker's
and the processes it waited for), then prints markdown tables: the run (wall, CPU, the load average sampled
through it), by directory, by kind, each worker's busy span, the slowest tests. The machines are shared, so read
ratios (CPU/wall, a directory's share) rather than seconds, and keep the load beside any figure you quote.

Kinds, first match wins, from markers and what a test did (so they hold for tests added later):
containers (marker docker), browser (marker browser), install (marker install), certification cells (a
parametrized test under tests/certification or tests/matrix), property tests (Hypothesis), end to end (it waited
for a child process: an agent, a pytest run, a tool), in process (the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CELL_DIRS = ("tests/certification/", "tests/matrix/")
KINDS = ("containers", "browser", "install", "certification cells", "property tests", "end to end", "in process")


def kind(test: dict[str, Any]) -> str:
    markers = set(test.get("markers", ()))
    for marker, name in (("docker", "containers"), ("browser", "browser"), ("install", "install")):
        if marker in markers:
            return name
    if test["nodeid"].startswith(CELL_DIRS) and "[" in test["nodeid"]:
        return "certification cells"
    if test.get("hypothesis"):
        return "property tests"
    if test.get("cpu_children", 0) > 0:
        return "end to end"
    return "in process"


def directory(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def read(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def module_seconds(tests: list[dict[str, Any]]) -> dict[str, float]:
    """Each test module's wall seconds (the sum of its tests'), longest first: what tests/conftest.py orders by."""
    seconds: dict[str, float] = defaultdict(float)
    for t in tests:
        seconds[t["nodeid"].split("::")[0]] += t["wall"]
    return {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))}


def _rows(groups: dict[str, list[dict[str, Any]]], total_wall: float, order: Iterable[str]) -> list[str]:
    lines = ["| group | tests | wall s (sum) | share | CPU s | CPU/wall | slowest s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in order:
        tests = groups.get(name)
        if not tests:
            continue
        wall = sum(t["wall"] for t in tests)
        cpu = sum(t["cpu_self"] + t["cpu_children"] for t in tests)
        lines.append(f"| {name} | {len(tests)} | {wall:.0f} | {wall / total_wall:.1%} | {cpu:.0f} | "
                     f"{cpu / wall if wall else 0:.2f} | {max(t['wall'] for t in tests):.1f} |")
    return lines


def report(tests: list[dict[str, Any]], top: int, run: dict[str, Any] | None = None) -> str:
    total_wall = sum(t["wall"] for t in tests) or 1.0
    total_cpu = sum(t["cpu_self"] + t["cpu_children"] for t in tests)
    out = []
    if run:
        out += ["| the run | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in run.items()] + [""]
    outcomes = defaultdict(int)
    for t in tests:
        outcomes[t["outcome"]] += 1
    counted = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
    out.append(f"{len(tests)} tests ({counted}); their wall times sum to {total_wall:.0f} s, their CPU to "
               f"{total_cpu:.0f} s (CPU/wall {total_cpu / total_wall:.2f})")
    out.append("")
    by_dir: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_worker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in tests:
        by_dir[directory(t["nodeid"])].append(t)
        by_kind[kind(t)].append(t)
        by_worker[t["worker"]].append(t)
    out += ["By kind:", ""] + _rows(by_kind, total_wall, KINDS) + [""]
    dirs = sorted(by_dir, key=lambda d: -sum(t["wall"] for t in by_dir[d]))
    out += ["By directory:", ""] + _rows(by_dir, total_wall, dirs) + [""]
    began = min(t["start"] for t in tests)
    ended = max(t["start"] + t["wall"] for t in tests)
    out += ["Workers (seconds from the first test's start):", "", "| worker | tests | busy s | first | last end |",
            "|---|---:|---:|---:|---:|"]
    for worker, mine in sorted(by_worker.items()):
        first, last = min(t["start"] for t in mine) - began, max(t["start"] + t["wall"] for t in mine) - began
        out.append(f"| {worker} | {len(mine)} | {sum(t['wall'] for t in mine):.0f} | {first:.0f} | {last:.0f} |")
    out.append(f"\nfirst test start to last test end: {ended - began:.0f} s\n")
    out += [f"The {top} slowest tests:", "", "| s | CPU/wall | kind | test |", "|---:|---:|---|---|"]
    for t in sorted(tests, key=lambda t: -t["wall"])[:top]:
        cpu = t["cpu_self"] + t["cpu_children"]
        out.append(f"| {t['wall']:.1f} | {cpu / t['wall'] if t['wall'] else 0:.2f} | {kind(t)} | `{t['nodeid']}` |")
    return "\n".join(out)


class LoadSampler(threading.Thread):
    """The 1-minute load average every few seconds while the suite runs: the figures are read beside it."""

    def __init__(self, every: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(self.every)

    def summary(self) -> str:
        s = self.samples or [os.getloadavg()[0]]
        return f"min {min(s):.1f}, median {statistics.median(s):.1f}, max {max(s):.1f} ({len(s)} samples)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="folder", type=Path, help="report on a folder an earlier run wrote")
    parser.add_argument("--keep", type=Path, help="write the per-test records here (default: a temporary folder)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--write-durations", type=Path, help="write each module's seconds here (tests/durations.json)")
    parser.add_argument("--timeout", type=float, default=5400, help="seconds the run may take")
    parser.add_argument("pytest_args", nargs="*", default=["-n", "2"])
    args = parser.parse_args(argv)
    if args.folder:
        tests = read(args.folder)
        print(report(tests, args.top))
        write_durations(args.write_durations, tests)
        return 0
    with tempfile.TemporaryDirectory(prefix="suite-durations-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SUITE_TIMING_DIR": str(folder),
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), str(ROOT / "benchmarks"),
                                                         os.environ.get("PYTHONPATH")) if p)}
        sampler = LoadSampler()
        sampler.start()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        try:
            code = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_timing_plugin", *args.pytest_args],
                                  cwd=ROOT, env=env, timeout=args.timeout).returncode
        finally:
            sampler.stop.set()
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        run = {"command": f"pytest {' '.join(args.pytest_args)}", "exit status": code, "wall s": f"{wall:.0f}",
               "CPU s (every process it waited for)": f"{cpu:.0f} ({cpu / wall:.2f} cores busy on average, "
                                                      f"of {os.cpu_count()})",
               "load average (1 min) through the run": sampler.summary()}
        tests = read(folder)
        print(report(tests, args.top, run))
        write_durations(args.write_durations, tests)
        return code


def write_durations(path: Path | None, tests: list[dict[str, Any]]) -> None:
    if path is not None:
        path.write_text(json.dumps(module_seconds(tests), indent=0) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
