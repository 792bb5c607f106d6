"""An agent started the way ``docker run`` starts one, modelled (issue 18, "What was seen"): a wrapper whose
agent runs outside the harness's process group (``setsid``), so that the harness's planned crash kills the
wrapper and not the agent, which goes on working and logging.

``python tests/common/escaping_wrapper.py python -m harness.agents.reference``: the first run's agent escapes
and its pid is kept in the state dir; a later run (the restart) waits until that agent has exited before it
starts its own, so the escaped agent's late lines always land in the log before the run ends (no race).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ESCAPED_PID_FILE = "escaped-agent.pid"


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def main(argv: list[str]) -> int:
    pid_file = Path(os.environ["HARNESS_STATE_DIR"]) / ESCAPED_PID_FILE
    if pid_file.exists():  # the restart: the first agent escaped the kill; let it finish what it does
        pid = int(pid_file.read_text())
        while running(pid):
            time.sleep(0.02)
    command = [sys.executable, *argv[1:]] if argv[0] in ("python", "python3") else argv
    agent = subprocess.Popen(command, start_new_session=True)  # setsid: out of the harness's process group
    if not pid_file.exists():
        pid_file.write_text(str(agent.pid))
    return agent.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
