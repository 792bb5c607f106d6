"""benchmarks/cpu_by_process.py, where the machine's CPU goes while a command runs (issue 47): a real command that
burns a known amount of CPU is found under its own command line, and the command's exit status is passed on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "cpu_by_process.py"
BURN = ("import time, sys; t = time.process_time()\n"
        "while time.process_time() - t < 1.0: pass\n"
        "time.sleep(1.5); sys.exit(3)")


def test_a_programs_cpu_is_found_under_its_command_line_and_the_exit_status_is_kept() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--", sys.executable, "-c", BURN], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    rows = re.findall(r"^\| ([\d.]+) \| `(.*)` \|$", done.stdout, re.M)
    burnt = [float(cpu) for cpu, command in rows if "process_time" in command]
    assert burnt and burnt[0] >= 0.9, done.stdout  # its own second of CPU, seen while it slept
    assert re.search(r"the machine's CPU busy \d+ s, idle \d+ s", done.stdout), done.stdout
