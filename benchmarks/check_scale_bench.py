"""Benchmark checking at scale: check time per operation at 1k, 10k and 100k operations, which must stay flat.

    python benchmarks/check_scale_bench.py [--operations 1000 10000 100000] [--mode check judge scenario]
        [--against OTHER_CHECKOUT] [--keep]

Each size is a synthetic evidence folder (tests/browser/synthetic.py: the stories a run holds, a clean
create, a lost response reconciled by a lookup, a dedup retry, a blind retry that makes two tickets, a retry
under one key with another payload, one after another; agent log, proxy journal, ledger and context), judged
in a child process of its own (so that one size's memory is not the next one's), the imports left out of the
time:

- ``check``: ``python -m harness check FOLDER`` (text report to /dev/null): load, correlate, judge, render;
- ``scenario``: what the engine does once the agent has exited (``harness.engine.judge_run``, which
  ``run_scenario`` calls): load, check, the black-box facts, the scenario's expectations (every intent
  ``succeeded``, one ticket each), verdict.json, verdict.txt and, the run having failed, its HTML pages;
- ``judge``: the same without the HTML pages (verdict.json and verdict.txt): the engine's part alone.

``--against`` judges each size with another checkout's harness too (its root folder, e.g. ``git worktree add
/tmp/base main``), in the same run, alternating with this one's on the same folders, so that a change is measured
against its baseline on a shared machine at the same moment; its rows say ``base``.

Printed per size and mode: operations, seconds, microseconds per operation, the ratio of that to the smallest
size's, the evidence's size on disk (every file of the folder), the child's peak RSS (its VmHWM), the child's RSS
once the harness is imported (``base``: the interpreter and the code, before any evidence is read), and the peak
over the evidence's size both ways: ``peak/disk`` (the whole process, what the goal reads) and
``(peak-base)/disk`` (what judging itself adds). Sizes up to 10,000 operations are judged ``--repeat`` times (3)
and the median run counts, since a shared machine's noise at 1,000 operations is as large as the run itself.
Goals, at the largest size, each line saying met or not: the per-operation time flat within 1.5x (the ratio of the
largest size's to the smallest's), and the peak RSS at most 3x the evidence's size on disk (``peak/disk``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_RATIO = 1.5
GOAL_MEMORY = 3.0  # peak RSS over the evidence's size on disk
REPEAT_UP_TO = 10_000  # sizes up to this are judged --repeat times (the median counts); larger ones once

CHILD = r"""
import contextlib, io, json, os, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
folder, mode, operations = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from harness.cli import main
from harness.engine import judge_run
import harness.checker, harness.evidence, harness.report, harness.writers  # noqa: the code, in the base
if mode == "scenario":
    import harness.html_report  # noqa: a failed run's pages
from harness.writers import VerdictText, write_verdict_json
def vm(name):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(name + ":"))
base = vm("VmRSS")  # the interpreter and the harness's code, before any evidence is read
out = Path(os.devnull)
context = json.loads((folder / "context.json").read_text())
intents = context["intents"]
effects = json.loads((folder / "ledger.json").read_text())["effects"]  # as save_run_ledger returns them
t0 = time.perf_counter()
if mode == "check":
    with open(out, "w") as sink, contextlib.redirect_stdout(sink):
        status = main(["check", str(folder)])
else:  # as harness.engine.run_scenario judges a run once its agent has exited
    expect = {{"states": {{i["intent_id"]: ["succeeded"] for i in intents}}, "effects": {{"tickets": operations}}}}
    writers = [write_verdict_json, VerdictText()] if mode == "judge" else None  # judge: no HTML pages
    result = judge_run(folder, scenario="-", label="-", expect=expect, runs=[], effects=effects, writers=writers)
    status = 0 if result.passed else 1
seconds = time.perf_counter() - t0
peak = vm("VmHWM")  # this process's own peak (ru_maxrss would carry the parent's over the exec)
print(json.dumps({{"seconds": seconds, "rss_mb": peak / 1024, "base_mb": base / 1024, "status": status}}))
"""


def build(folder: Path, operations: int) -> float:
    from tests.browser.synthetic import build as build_folder

    t0 = time.perf_counter()
    build_folder(folder, operations)
    return time.perf_counter() - t0


def measure(folder: Path, mode: str, operations: int, root: Path = ROOT) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD.format(root=str(root)), str(folder), mode, str(operations)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} of {folder} failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--operations", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--mode", nargs="+", choices=("check", "judge", "scenario"), default=["check", "scenario"])
    parser.add_argument("--against", type=Path, help="another checkout's root: its harness judges each size too, "
                                                     "alternating with this one's (rows marked base)")
    parser.add_argument("--repeat", type=int, default=3,
                        help=f"judge each size up to {REPEAT_UP_TO:,} operations this many times and keep the median "
                             "run (a shared machine's noise is seconds; default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the evidence folders (printed)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="check-scale-"))
    met = True
    try:
        folders, disk_mb = {}, {}
        for n in args.operations:
            folders[n] = root / f"ops-{n}"
            seconds = build(folders[n], n)
            disk_mb[n] = sum(p.stat().st_size for p in folders[n].iterdir()) / 2**20  # MiB, as RSS is counted
            print(f"built {n:,} operations in {seconds:.1f} s ({disk_mb[n]:.0f} MB)", flush=True)
        print(f"{'mode':<9} {'operations':>10} {'seconds':>8} {'us/op':>7} {'ratio':>6} {'disk':>7} {'peak RSS':>9} "
              f"{'base':>6} {'peak/disk':>9} {'(peak-base)/disk':>16}", flush=True)
        trees = [("", ROOT)] + ([("base ", args.against.resolve())] if args.against else [])
        for mode in args.mode:
            first: dict[str, float] = {}
            mine_per_op = mine_memory = 0.0
            for n in args.operations:
                runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
                for _ in range(args.repeat if n <= REPEAT_UP_TO else 1):
                    for label, tree in trees:  # alternating: each tree meets the machine's moods alike
                        runs[label].append(measure(folders[n], mode, n, tree))
                for label, _ in trees:
                    m = sorted(runs[label], key=lambda r: r["seconds"])[len(runs[label]) // 2]  # the median run: the
                    # fastest of a short run catches a quiet moment of a shared machine that a 100,000-operation
                    # run never has
                    per_op = m["seconds"] / n * 1e6
                    first.setdefault(label, per_op)
                    memory = m["rss_mb"] / disk_mb[n]
                    print(f"{label + mode:<9} {n:>10,} {m['seconds']:>8.2f} {per_op:>7.0f} "
                          f"{per_op / first[label]:>5.2f}x {disk_mb[n]:>4.0f} MB {m['rss_mb']:>6.0f} MB "
                          f"{m['base_mb']:>3.0f} MB {memory:>8.2f}x "
                          f"{(m['rss_mb'] - m['base_mb']) / disk_mb[n]:>15.2f}x", flush=True)
                    if not label:
                        mine_per_op, mine_memory = per_op, memory
            per_op, memory = mine_per_op, mine_memory  # the goals are this tree's
            first_per_op = first[""]
            ratio = per_op / first_per_op
            ok = ratio <= GOAL_RATIO
            print(f"{mode}: per-operation time at {args.operations[-1]:,} is {ratio:.2f}x that at "
                  f"{args.operations[0]:,} -> {'flat (met)' if ok else 'NOT flat'} (goal <= {GOAL_RATIO}x)",
                  flush=True)
            fits = memory <= GOAL_MEMORY
            met = met and ok and fits
            print(f"{mode}: peak RSS at {args.operations[-1]:,} is {memory:.2f}x the evidence's size on disk -> "
                  f"{'met' if fits else 'NOT met'} (goal <= {GOAL_MEMORY}x)", flush=True)
    finally:
        if args.keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
