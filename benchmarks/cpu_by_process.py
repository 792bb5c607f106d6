"""Where the machine's CPU goes while a command runs, by process command line (issue 47).

    python benchmarks/cpu_by_process.py [--top 40] -- COMMAND...     e.g. -- bash .ci/run

suite_durations.py counts the CPU of what each test's worker reaped; it misses what lives across tests (the proxy,
the destination pools, Spark's JVM, Docker's engine) and says nothing of which program spent it. This samples every
process's CPU time once a second (/proc/PID/stat: its own, and its reaped children's), adds up what each command
line spent while the command ran, and prints the machine's busy and idle time beside it: on a machine whose cores are
busy throughout, more workers cannot help and only less CPU can. A process that lives under a second is seen in its
parent's reaped-children time. Paths and numbers in command lines are folded, so one program's runs add up.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")


def fold(command: str) -> str:
    """One program's runs under one name, on one line: temp paths, hashes and numbers folded."""
    command = re.sub(r"\s+", " ", command)
    command = re.sub(r"/tmp/\S+", "/tmp/…", command)
    command = re.sub(r"[0-9a-f]{8,}", "…", command)
    return re.sub(r"\d{3,}", "N", command)[:110]


def _processes() -> dict[tuple[str, str], tuple[int, int, str]]:
    seen = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        # (pid, start time): a pid used again is another process
        seen[(pid, fields[19])] = (int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), command)
    return seen


def _machine() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:]]
    return sum(ticks[:3]) + sum(ticks[5:8]), ticks[3] + ticks[4]  # busy, idle (with I/O wait)


def sample(done: threading.Event) -> tuple[collections.Counter[str], collections.Counter[str], int, int]:
    own: collections.Counter[str] = collections.Counter()
    reaped: collections.Counter[str] = collections.Counter()
    before, (busy0, idle0) = _processes(), _machine()
    while not done.wait(1.0):
        now = _processes()
        for key, (cpu, children, command) in now.items():
            was = before.get(key, (0, 0, command))  # new since the last look: all it spent counts
            own[fold(command)] += cpu - was[0]
            reaped[fold(command)] += children - was[1]
        before = now
    busy, idle = _machine()
    return own, reaped, busy - busy0, idle - idle0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    done, result = threading.Event(), []
    watcher = threading.Thread(target=lambda: result.append(sample(done)))
    watcher.start()
    start = time.monotonic()
    try:
        status = subprocess.call(args.command)
    finally:
        done.set()
        watcher.join()
    own, reaped, busy, idle = result[0]
    print(f"\n{time.monotonic() - start:.0f} s; the machine's CPU busy {busy / TICKS:.0f} s, idle "
          f"{idle / TICKS:.0f} s ({os.cpu_count()} cores); exit status {status}\n")
    print("| CPU s | program (own time, sampled each second) |\n|---:|---|")
    for command, ticks in own.most_common(args.top):
        if ticks:
            print(f"| {ticks / TICKS:.1f} | `{command or '(kernel)'}` |")
    print("\n| CPU s | parent (the CPU of the children it reaped) |\n|---:|---|")
    for command, ticks in reaped.most_common(args.top // 4):
        if ticks:
            print(f"| {ticks / TICKS:.1f} | `{command or '(kernel)'}` |")
    return status


if __name__ == "__main__":
    sys.exit(main())
