"""Fuzz the scenario loader with thousands of hostile files and print what happened.

The files are the seeded mutations of the bundled catalogue from tests/fuzz/corpus.py (the CI suite
runs a few hundred of them). Each case is loaded in this process; the script counts the outcomes
(loaded / ScenarioError naming the file / anything else, which is a bug), the slowest case, and the
peak memory of one load and of the process (ru_maxrss). The time of a case is taken without
tracemalloc (which slows a load several times); the memory of every --memory-every'th case is taken
by loading it once more under tracemalloc.

    python benchmarks/fuzz_scenarios.py [--cases 5000] [--seed 1] [--memory-every 5] [--show-crashes 10]

Exit status 1 when any case crashed or gave an error not naming its file.
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.errors import ScenarioError  # noqa: E402
from harness.scenario import load  # noqa: E402
from tests.fuzz.corpus import cases  # noqa: E402


def _peak_of_load(path: Path) -> int:
    tracemalloc.start()
    try:
        load(path)
    except BaseException:  # noqa: BLE001, S110 - the first load counted the outcome
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--memory-every", type=int, default=5)
    parser.add_argument("--show-crashes", type=int, default=10)
    args = parser.parse_args()

    outcomes: collections.Counter[str] = collections.Counter()
    by_mutator: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    crashes: list[str] = []
    slowest = (0.0, "")
    peak_bytes = (0, "")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, content) in enumerate(cases(args.seed, args.cases)):
            path = Path(tmp) / f"{label}.yaml"
            path.write_bytes(content)
            start = time.perf_counter()
            try:
                load(path)
                outcome = "loaded"
            except ScenarioError as exc:
                outcome = "scenario error" if str(exc).startswith(str(path)) else "error not naming the file"
            except BaseException as exc:  # noqa: BLE001 - counting them is the point
                outcome = f"crash {type(exc).__name__}"
                crashes.append(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")
            seconds = time.perf_counter() - start
            outcomes[outcome] += 1
            by_mutator[label.split("-")[1]][outcome] += 1
            slowest = max(slowest, (seconds, label))
            if i % args.memory_every == 0:
                peak_bytes = max(peak_bytes, (_peak_of_load(path), label))
            path.unlink()
    total = time.perf_counter() - began

    print(f"{args.cases} cases from seed {args.seed} in {total:.1f} s")
    for outcome, count in outcomes.most_common():
        print(f"  {outcome:<28} {count:>6}")
    print("by mutator:")
    for name in sorted(by_mutator):
        print(f"  {name:<20} " + ", ".join(f"{o} {c}" for o, c in by_mutator[name].most_common()))
    print(f"slowest case: {slowest[0] * 1000:.0f} ms ({slowest[1]})")
    print(f"peak memory of one load (every {args.memory_every}th case): "
          f"{peak_bytes[0] / 2**20:.1f} MiB ({peak_bytes[1]})")
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    for line in crashes[:args.show_crashes]:
        print("CRASH", line)
    bad = sum(c for o, c in outcomes.items() if o not in ("loaded", "scenario error"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
