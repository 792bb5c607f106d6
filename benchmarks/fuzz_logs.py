"""Thousands of hostile audit logs (tests/fuzz/hostile_logs.py) through audit, verify and check; prints counts.

    python benchmarks/fuzz_logs.py [--cases 3000] [--seed 20261201]

For each hostile kind and command: how many cases ended with exit status 0, 1 and 2, and how many went
wrong (a traceback, another status, a malformed line not named by file and line), with the first few.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.hostile_logs import SEED, cases  # noqa: E402 -- after the path is set
from tests.fuzz.test_log_fuzz import judge, run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    counts: Counter[tuple[str, str, int]] = Counter()
    wrong: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        for number, (kind, data, line) in enumerate(cases(args.cases, args.seed)):
            folder = Path(root) / f"case{number}"
            folder.mkdir()
            try:
                problems = judge(folder, kind, data, line)
                for command in ("audit", "verify"):
                    counts[(kind, command, run(command, str(folder / "agent.ndjson"))[0])] += 1
                counts[(kind, "check", run("check", str(folder))[0])] += 1
            except Exception:  # noqa: BLE001 -- a traceback is what this counts
                problems = ["traceback: " + traceback.format_exc().splitlines()[-1]]
            wrong += [f"case {number} ({kind}, line {line}): {p}" for p in problems]
    elapsed = time.perf_counter() - started
    print(f"{args.cases} cases (seed {args.seed}) in {elapsed:.1f} s")
    print(f"{'kind':<10} {'command':<7} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7}")
    for kind in sorted({k for k, _, _ in counts}):
        for command in ("audit", "verify", "check"):
            row = [counts[(kind, command, s)] for s in (0, 1, 2)]
            print(f"{kind:<10} {command:<7} {row[0]:>7} {row[1]:>7} {row[2]:>7}")
    print(f"went wrong: {len(wrong)}")
    for text in wrong[:10]:
        print("  " + text)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
