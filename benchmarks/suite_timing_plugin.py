"""A pytest plugin that writes, per test, its wall time by phase and the CPU time it cost, as JSON lines.

    SUITE_TIMING_DIR=FOLDER pytest -p suite_timing_plugin ...   (benchmarks/ on PYTHONPATH; suite_durations.py does it)

Each process (the controller, each xdist worker) appends to its own file, FOLDER/<worker>.jsonl. CPU time is the
worker's process tree's (user + system, from /proc): the worker, every process under it still running (destination
pools, the proxy, a JVM) and what they reaped (agents, pytest subprocesses). A container's CPU is the engine's, not
the worker's, so container tests look more wait-bound than they are; a pooled process serving two workers is
charged to the one that started it. A session-scoped fixture's setup is charged to the first test that asked for
it, as it happened.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live process under it, each with what it reaped (so a process that ended
    inside the tree is still counted, once, in its parent's)."""
    parents, cpu = {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])  # after "pid (comm)": state, ppid, ..., utime stime cutime cstime at 11-14
        cpu[pid] = sum(int(f) for f in fields[11:15]) / TICK
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def _cpu() -> tuple[float, float]:
    """(this process's own CPU, the rest of its tree's)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    mine = own.ru_utime + own.ru_stime
    return mine, max(_tree_cpu(os.getpid()) - mine, 0.0)


class SuiteTiming:
    def __init__(self, folder: Path, worker: str) -> None:
        self.out = (folder / f"{worker}.jsonl").open("a", encoding="utf-8")
        self.worker = worker
        self.phases: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        began, (own0, kids0) = time.time(), _cpu()
        record: dict[str, Any] = {"nodeid": item.nodeid, "worker": self.worker, "start": began, "outcome": "passed"}
        self.phases[item.nodeid] = record
        try:
            return (yield)
        finally:
            own1, kids1 = _cpu()
            record.update(wall=time.time() - began, cpu_self=own1 - own0, cpu_children=kids1 - kids0,
                          markers=sorted({mark.name for mark in item.iter_markers()}),
                          fixtures=sorted(getattr(item, "fixturenames", ())),
                          hypothesis=bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False)))
            self.out.write(json.dumps(self.phases.pop(item.nodeid)) + "\n")
            self.out.flush()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = self.phases.get(report.nodeid)
        if record is None:
            return
        record[report.when] = report.duration
        if report.failed or (report.skipped and record["outcome"] == "passed"):
            record["outcome"] = "failed" if report.failed else "skipped"

    def pytest_unconfigure(self) -> None:
        self.out.close()


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get("SUITE_TIMING_DIR")
    if not folder:
        return
    worker = getattr(config, "workerinput", {}).get("workerid", "controller")
    config.pluginmanager.register(SuiteTiming(Path(folder), worker), "suite-timing")
