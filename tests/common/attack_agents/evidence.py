"""An agent under test that works (as the reference agent, or a wrong one), then attacks its evidence folder
from inside its run (issue 44, attacks 1, 2, 5 and 6):

    python -m tests.common.attack_agents.evidence MODE [ARG]

- ``journal``: work as retry_after_unread (FAIL H011 in rate_limited), then rewrite journal.ndjson so that no
  answer asked to wait: the journal the checker trusts over the log, as the agent would like it;
- ``journal-junk``: work as the reference agent, then append a line that is no JSON to journal.ndjson;
- ``symlinks DIR``: plant, at every name the harness writes into the folder after the agent, a symlink to a file
  of DIR (outside the folder), then work as the reference agent;
- ``fifo-log``: work as the reference agent, then put a FIFO in place of its log;
- ``sparse-log``: work as the reference agent, then put a 1 GiB one-line sparse file in place of its log;
- ``escape``: work as the reference agent, then log an event whose ids draw a fake ``verdict: PASSED`` line;
- ``stop-proxy PID``: work as the reference agent, then SIGSTOP the fault proxy (its pid, given);
- ``fifo-outputs``: put FIFOs at agent.stdout and agent.stderr (which the harness opens again for a restarted
  agent, and reads the tail of), then work as the reference agent;
- ``deep-state``: work as the reference agent, then leave a tree of ``DEEP_STATE`` nested folders (a file at its
  bottom) in its state dir, deeper than a recursive walk of the evidence folder can go.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from harness.agents.reference import Agent
from harness.agents.wrong.retry_after_unread import RetryAfterUnread
from harness.contract import AUDIT_LOG_ENV, STATE_DIR_ENV

# what the harness writes after the agent exited (or rewrites then)
HARNESS_NAMES = ("context.json", "ledger.json", "ledger.sqlite", "verdict.json", "verdict.txt", "report.html",
                 "agent.checkpoint.json", "ledger.checkpoint.json", "journal.checkpoint.json",
                 "context.checkpoint.json", "verdict.checkpoint.json", "context.json.tmp", "ledger.json.tmp",
                 "checkpoint.key", "agent.trace.checkpoint.json")
DEEP_STATE = 1200  # past Python's recursion limit (shutil.rmtree and Path.rglob recurse once a level)


def folder() -> Path:
    return Path(os.environ[AUDIT_LOG_ENV]).parent


def rewrite_journal() -> None:
    journal = folder() / "journal.ndjson"
    lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    for line in lines:
        line["client_retry_after"] = None
    tmp = journal.with_name("journal.forged")
    tmp.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    tmp.replace(journal)


def attack(mode: str, arg: str | None) -> None:
    here = folder()
    log = Path(os.environ[AUDIT_LOG_ENV])
    if mode == "journal":
        rewrite_journal()
    elif mode == "journal-junk":
        with open(here / "journal.ndjson", "a") as out:
            out.write("this is no JSON\n")
    elif mode == "fifo-log":
        log.unlink()
        os.mkfifo(log)
    elif mode == "sparse-log":
        log.unlink()
        with open(log, "wb") as out:
            out.truncate(1 << 30)
    elif mode == "escape":
        # ESC codes draw over a terminal; a bidi override turns "FAILED" backwards on a page, a zero-width space
        # makes two ids look the same
        fake = "op\x1b[2K\rverdict: PASSED\nverdict: PASSED\x1b[8m\u202eDELIAF\u200b"
        first = next(json.loads(line) for line in log.read_text().splitlines() if '"operation"' in line)
        with open(log, "a") as out:  # a well-formed operation event whose id draws over the report
            out.write(json.dumps({**first, "operation_id": fake}) + "\n")
    elif mode == "deep-state":
        fd = os.open(os.environ[STATE_DIR_ENV], os.O_RDONLY)
        for _ in range(DEEP_STATE):  # by folder fds: the path outgrows PATH_MAX
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        os.close(fd)
    elif mode == "stop-proxy":
        assert arg is not None
        os.kill(int(arg), signal.SIGSTOP)


def main() -> int:
    mode, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    if mode == "fifo-outputs":
        for name in ("agent.stdout", "agent.stderr"):
            (folder() / name).unlink()
            os.mkfifo(folder() / name)
    if mode == "symlinks":
        assert arg is not None
        for name in HARNESS_NAMES:
            (folder() / name).unlink(missing_ok=True)
            (folder() / name).symlink_to(Path(arg) / name)
    status = (RetryAfterUnread if mode == "journal" else Agent)().run()
    attack(mode, arg)
    return status


if __name__ == "__main__":
    sys.exit(main())
