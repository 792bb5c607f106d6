"""Runs the held-out batch through the real harness and prints its table (issue 43, goal 4).

Every agent under benchmarks/heldout/agents/ declares in its first lines:
  kind: wrong | correct
  flaw: one line (wrong agents)
  should: the rule codes that name the flaw, decided from the docs before any run (wrong agents)
  scenarios: the catalogue scenarios where the flaw can show (wrong agents)
  transport: http | mcp | ssh, comma-separated (correct agents: every catalogue scenario of those
             transports, plus the probe scenarios of benchmarks/heldout/scenarios/)
Each run is `python -m harness run SCENARIO --agent CMD --format json`, two at a time (the machine has 2 cores).

A wrong agent's class, over its scenarios: caught-by-naming-rule (a failed check is one of `should`),
caught-other (some other H-code failed, or the run failed on the agent's exit status), X001-only (only the
scenario's own expectations failed), PASSED. A correct agent's failed runs are false FAILs.

    python benchmarks/heldout/run_batch.py [--markdown FILE] [--only NAME ...] [-j 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CATALOGUE = ROOT / "harness" / "scenarios"
PROBES = HERE / "scenarios"
HEADER = re.compile(r"^\W*(kind|flaw|should|scenarios|transport):\s*(.*?)\s*$")


@dataclass
class HeldOut:
    name: str
    path: Path
    kind: str
    flaw: str = ""
    should: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    transport: tuple[str, ...] = ()
    runs: list[dict] = field(default_factory=list)

    @property
    def command(self) -> str:
        runner = {".py": "python", ".js": "node", ".sh": "bash"}[self.path.suffix]
        return f"{runner} {shlex.quote(str(self.path))}"


def read_agent(path: Path) -> HeldOut:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:40]:
        match = HEADER.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    if fields.get("kind") not in ("wrong", "correct"):
        raise SystemExit(f"{path}: no 'kind: wrong|correct' line in its first 40 lines")
    words = lambda key: tuple(w for w in re.split(r"[,\s]+", fields.get(key, "")) if w)  # noqa: E731
    should = tuple(re.findall(r"\bH\d{3}\b", fields.get("should", "")))  # "none (...)": no rule named
    return HeldOut(path.stem, path, fields["kind"], fields.get("flaw", ""), should, words("scenarios"),
                   words("transport"))


def scenario_transport(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if re.search(r"service:\s*mcp\b", text):
        return "mcp"
    if re.search(r"service:\s*ssh\b", text):
        return "ssh"
    return "http"


def scenarios_for(agent: HeldOut) -> list[str]:
    if agent.kind == "wrong":  # a probe's name, else the catalogue's
        return [str(PROBES / f"{s}.yaml") if (PROBES / f"{s}.yaml").is_file() else s for s in agent.scenarios]
    chosen = [p.stem for p in sorted(CATALOGUE.glob("*.yaml")) if scenario_transport(p) in agent.transport]
    chosen += [str(p) for p in sorted(PROBES.glob("*.yaml")) if scenario_transport(p) in agent.transport]
    return chosen


def run_one(agent: HeldOut, scenario: str, evidence: Path) -> dict:
    command = [sys.executable, "-m", "harness", "run", scenario, "--agent", agent.command, "--format", "json",
               "--evidence-dir", str(evidence), "--keep-evidence", "failed"]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    result = {"scenario": Path(scenario).stem, "status": proc.returncode, "seconds": time.monotonic() - started,
              "failed": [], "x001": [], "exit_status": None, "evidence": None}
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        result["error"] = (proc.stderr or proc.stdout)[-400:]
        return result
    result["evidence"] = out.get("evidence")
    result["failed"] = sorted(name.split()[0] for name, word in out.get("checks", {}).items() if word == "failed")
    result["incomplete"] = bool(out.get("incomplete"))
    verdict = Path(out["evidence"]) / "verdict.json" if out.get("evidence") else None
    if verdict and verdict.is_file():
        full = json.loads(verdict.read_text(encoding="utf-8"))
        result["x001"] = full.get("expectation_failures") or []
        runs = full.get("agent_runs") or []
        result["exit_status"] = runs[-1]["exit_status"] if runs else None
    return result


def classify(agent: HeldOut) -> str:
    if agent.kind == "correct":
        bad = [r["scenario"] for r in agent.runs if r["status"] != 0]
        return f"{len(bad)} false FAIL(s)" + (f": {', '.join(bad)}" if bad else "")
    if any(set(r["failed"]) & set(agent.should) for r in agent.runs):
        return "caught-by-naming-rule"
    if any(r["failed"] or (r["status"] == 1 and not r["x001"]) for r in agent.runs):
        return "caught-other"
    if any(r["x001"] for r in agent.runs):
        return "X001-only"
    if any(r["status"] == 3 for r in agent.runs):
        return "INCOMPLETE"  # the harness judged nothing: a miss, counted apart
    return "PASSED"


def table(agents: list[HeldOut]) -> str:
    lines = ["| agent | flaw | scenarios | verdict | rule codes | class |", "|---|---|---|---|---|---|"]
    for agent in agents:
        words = {0: "PASS", 1: "FAIL", 3: "INCOMPLETE"}
        verdicts = ", ".join(f"{r['scenario']}:{words.get(r['status'], r['status'])}" for r in agent.runs) \
            if agent.kind == "wrong" else f"{sum(r['status'] == 0 for r in agent.runs)}/{len(agent.runs)} PASS"
        codes = sorted({c for r in agent.runs for c in r["failed"]}
                       | ({"X001"} if any(r["x001"] for r in agent.runs) else set()))
        flaw = agent.flaw if agent.kind == "wrong" else f"(correct; {', '.join(agent.transport)})"
        should = f" (should: {', '.join(agent.should)})" if agent.should else ""
        lines.append(f"| {agent.name} | {flaw}{should} | {len(agent.runs)} | {verdicts} | {' '.join(codes) or '-'} "
                     f"| {classify(agent)} |")
    wrong = [a for a in agents if a.kind == "wrong"]
    classes = ("caught-by-naming-rule", "caught-other", "X001-only", "PASSED", "INCOMPLETE")
    counts = {c: sum(classify(a) == c for a in wrong) for c in classes}
    false_fails = sum(r["status"] != 0 for a in agents if a.kind == "correct" for r in a.runs)
    runs = sum(len(a.runs) for a in agents if a.kind == "correct")
    lines += ["", f"wrong agents: {len(wrong)}: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
              f"correct agents: {len(agents) - len(wrong)}, {runs} runs, false FAILs: {false_fails}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="agent names to run (default: all)")
    parser.add_argument("--markdown", type=Path, help="also write the table to FILE")
    parser.add_argument("--json", type=Path, help="also write every run's result to FILE")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    paths = sorted(p for p in (HERE / "agents").iterdir() if p.suffix in (".py", ".js", ".sh") and p.stem != "base"
                   and not p.stem.startswith("_"))
    paths.append(HERE / "agents" / "base.py")
    agents = [read_agent(p) for p in paths if not args.only or p.stem in args.only]
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="heldout-")  # the failed runs' evidence stays there, to read
    print(f"evidence of failed runs: {tmp}", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {pool.submit(run_one, a, s, Path(tmp) / "evidence"): a for a in agents for s in scenarios_for(a)}
        for done in concurrent.futures.as_completed(jobs):
            result = done.result()
            jobs[done].runs.append(result)
            print(f"{jobs[done].name} {result['scenario']}: status {result['status']} {result['failed']}"
                  f"{' X001' if result['x001'] else ''} {result.get('error', '')}", file=sys.stderr, flush=True)
    for agent in agents:
        agent.runs.sort(key=lambda r: r["scenario"])
    text = table(agents) + f"\nwall time: {time.monotonic() - started:.0f} s, {args.jobs} runs at a time"
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({a.name: a.runs for a in agents}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
