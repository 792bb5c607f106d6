"""The sample team service (examples/sample-orders) as a plain process, and as the scenarios' container
destination: what the container tests share."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = ROOT / "examples" / "sample-orders"
SAMPLE_APP = SAMPLE_DIR / "app.py"
# how a scenario lists the sample's effects (its GET /_effects), as a team would declare it
HTTP_LEDGER = {"http": {"path": "/_effects", "rows": "items"},
               "fields": {"effect_ref": "id", "kind": "kind", "operation_key": "idempotency_key",
                          "client_reference": "client_reference", "committed_at": "committed_at",
                          "params": "params"}}
# the same effects read from its database file by a query run in its container
SQL_LEDGER = {"sql": {"engine": "sqlite", "database": "/data/orders.db",
                      "query": "SELECT id, idempotency_key, client_reference, params, created_at FROM orders "
                               "ORDER BY n"},
              "fields": {"effect_ref": "id", "operation_key": "idempotency_key",
                         "client_reference": "client_reference", "committed_at": "created_at", "params": "params"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def sample_process(folder: Path) -> Iterator[str]:
    """The sample service on a free port of 127.0.0.1, its database in ``folder``; its base URL."""
    port = free_port()
    log = (folder / "sample-orders.log").open("wb")
    process = subprocess.Popen([sys.executable, str(SAMPLE_APP), "--host", "127.0.0.1", "--port", str(port),
                                "--db", str(folder / "orders.db")], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=1):
                    break
            except (OSError, urllib.error.URLError):
                if process.poll() is not None or time.monotonic() > deadline:
                    said = (folder / "sample-orders.log").read_text()
                    raise AssertionError(f"the sample service did not start: {said}") from None
                time.sleep(0.05)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        log.close()
