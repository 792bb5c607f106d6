"""kind: wrong
flaw: the audit log is written through a buffered file and flushed at exit: a crash loses the run's events
should: H001, H021, H017
scenarios: crash_after_dispatch

(contract section 5: appended and flushed line by line, so a crash loses nothing already written.) The
killed run's operation event never reaches the file; the restarted agent logs attempts and a resolution
under an operation id no operation event declares.
"""
import json
import os
import sys
import time

from base import Agent


class Flawed(Agent):
    def __init__(self):
        super().__init__()
        self.log.close()
        self.log = open(os.environ["HARNESS_AUDIT_LOG"], "a", encoding="utf-8", buffering=1 << 16)

    def emit(self, event, op_id, **fields):
        record = {"event": event, "ts": time.time(), "session_id": self.session, "operation_id": op_id}
        record.update({k: v for k, v in fields.items() if v is not None})
        self.log.write(json.dumps(record) + "\n")  # flushed when the file is closed


if __name__ == "__main__":
    sys.exit(Flawed().run())
