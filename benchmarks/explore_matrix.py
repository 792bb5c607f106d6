"""Exploration against the matrix: from one base scenario alone, which wrong agents does it find?

For every wrong agent of harness/expected_outcomes.yaml, runs `python -m harness explore BASE` (its
own process, `--jobs` at a time) with a fixed seed and budget, and prints a Markdown table: the
agent, the schedules it took to fail it, the shrunk schedule, the rule codes of the shrunk failure,
whether those include a rule that names the agent's flaw (the codes its `caught_by` lists), and
whether the reproducer was confirmed. With `--reference N` it also explores N schedules with the
reference agent on each base (any finding there is a bug of the agent or of the checker).

    python benchmarks/explore_matrix.py [--base response_lost] [--examples 200] [--seed 1] [--jobs 2]
    python benchmarks/explore_matrix.py --reference 500 --base response_lost --base two_intents_one_run ...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.matrix import load_expectations


def explore(base: str, agent: str, examples: int, seed: int, root: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"{agent.split('.')[-1]}-", dir=root))
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "harness", "explore", base, "--agent", agent, "--examples",
                          str(examples), "--seed", str(seed), "--no-database", "--format", "json", "-q",
                          "--reproducer", str(folder / "found.yaml"), "--evidence-dir", str(folder / "evidence")],
                         capture_output=True, text=True, timeout=3600)
    if out.returncode not in (0, 1):
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:], "seconds": time.monotonic() - began}
    report = json.loads(out.stdout)
    report["wall_seconds"] = time.monotonic() - began
    return report


def flaw_rules(expectations: Any, agent: str) -> set[str]:
    return {code for codes in expectations.caught_by[agent].values() for code in codes}


def row(agent: str, report: dict[str, Any], expected: set[str]) -> str:
    if "error" in report:
        return f"| `{agent}` | error: {report['error']} | | | | |"
    found = report["found"][0] if report["found"] else None
    if found is None:
        flaky = f"; flaky: {', '.join(','.join(f['first_codes']) for f in report['flaky'])}" if report["flaky"] else ""
        return f"| `{agent}` | not found in {report['runs']} runs{flaky} | | | | {report['seconds']:.0f} s |"
    names = set(found["codes"]) & expected
    schedule = "<br>".join(found["summary"])
    return (f"| `{agent}` | {found['first_seen_at']} | {schedule} | {', '.join(found['codes'])} | "
            f"{'yes: ' + ', '.join(sorted(names)) if names else 'no'}{'' if found['confirmed'] else ' (NOT confirmed)'}"
            f" | {report['seconds']:.0f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", action="append", default=None, help="base scenario(s) (default: response_lost)")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--agent", action="append", default=None, help="wrong agent name(s) (default: all)")
    parser.add_argument("--reference", type=int, default=0, metavar="N",
                        help="explore N schedules with the reference agent on each base instead")
    args = parser.parse_args()
    bases = args.base or ["response_lost"]
    expectations = load_expectations()
    root = Path(tempfile.mkdtemp(prefix="explore-matrix-"))
    began = time.monotonic()
    if args.reference:
        with ThreadPoolExecutor(args.jobs) as pool:
            reports = list(pool.map(lambda b: explore(b, expectations.reference, args.reference, args.seed, root),
                                    bases))
        print("| base scenario | schedules run | findings | flaky | seconds | schedules/s |")
        print("|---|---|---|---|---|---|")
        failed = False
        for base, report in zip(bases, reports, strict=True):
            if "error" in report:
                print(f"| {base} | error: {report['error']} | | | | |")
                failed = True
                continue
            findings = [f"{','.join(f['codes'])}: {'; '.join(f['summary'])} ({f['evidence_dir']})"
                        for f in report["found"]] + [f"{','.join(f['codes'])} ({f['evidence_dir']})"
                                                     for f in report["also_failed"]]
            flaky = [f"{','.join(f['first_codes'])} ({f['evidence_dir']})" for f in report["flaky"]]
            failed |= bool(findings or flaky)
            rate = report["runs"] / report["seconds"] if report["seconds"] else 0.0
            print(f"| {base} | {report['runs']} | {len(findings)} {'<br>'.join(findings)} | "
                  f"{len(flaky)} {'<br>'.join(flaky)} | {report['seconds']:.0f} | {rate:.2f} |")
        print(f"\n{time.monotonic() - began:.0f} s in all; evidence under {root}")
        return 1 if failed else 0
    agents = args.agent or list(expectations.flaws)
    for base in bases:
        with ThreadPoolExecutor(args.jobs) as pool:
            reports = list(pool.map(lambda a, b=base: explore(b, expectations.command(a), args.examples, args.seed,
                                                              root), agents))
        print(f"\nExploring `{base}` (seed {args.seed}, {args.examples} schedules at most per agent):\n")
        print("| wrong agent | schedules to fail it | shrunk schedule | rule codes | a rule naming its flaw | time |")
        print("|---|---|---|---|---|---|")
        for agent, report in zip(agents, reports, strict=True):
            print(row(agent, report, flaw_rules(expectations, agent)))
        found = sum(1 for r in reports if r.get("found"))
        print(f"\n{found} of {len(agents)} wrong agents found from {base}")
    print(f"\n{time.monotonic() - began:.0f} s in all; reproducers and evidence under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
