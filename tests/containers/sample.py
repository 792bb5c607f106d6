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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = ROOT / "examples" / "sample-orders"
SAMPLE_APP = SAMPLE_DIR / "app.py"
# how a scenario lists the sample's effects (its GET /_effects), as a team would declare it
HTTP_LEDGER = {"http": {"path": "/_effects", "rows": "items"},
               "fields": {"effect_ref": "id", "kind": "kind", "operation_key": "idempotency_key",
                          "client_reference": "client_reference", "committed_at": "committed_at",
                          "params": "params"}}
# the same effects read from its database by a query run in its container (SQLite), or in the database's
POSTGRES_LEDGER = {"sql": {"engine": "postgres", "container": "database", "database": "postgres", "user": "postgres",
                           "query": "SELECT id, idempotency_key, client_reference, params, created_at FROM orders "
                                    "ORDER BY n"},
                   "fields": {"effect_ref": "id", "operation_key": "idempotency_key",
                              "client_reference": "client_reference", "committed_at": "created_at",
                              "params": "params"}}
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


# -- the sample as a team's image -----------------------------------------------------------------------

def _built(dockerfile: Path, base: str, name: str, files: tuple[Path, ...] = ()) -> str:
    """The image of ``dockerfile`` FROM ``base`` (its ``ARG BASE`` written out: nothing is pulled), built
    (``images.build``) once per change of either; its tag names both."""
    import hashlib
    import shutil
    import tempfile

    from harness.containers import docker_client, images

    text = dockerfile.read_text()
    digest = hashlib.sha256(base.encode() + text.encode() + b"".join(f.read_bytes() for f in files))
    tag = f"{name}:{digest.hexdigest()[:12]}"
    if docker_client.image_present(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as folder:
        for source in files:
            shutil.copy(source, folder)
        (Path(folder) / "Dockerfile").write_text(
            "\n".join(line for line in text.splitlines() if not line.startswith("ARG BASE"))
            .replace("FROM ${BASE}", f"FROM {base}") + "\n")
        return images.build(Path(folder), tag)


def sample_image() -> str:
    """The sample service's image (SQLite on its disk), FROM this tree's runtime image."""
    from harness.containers import images

    return _built(SAMPLE_DIR / "Dockerfile", images.ensure_runtime_image(), "sample-orders", (SAMPLE_APP,))


def sample_postgres_images() -> tuple[str, str]:
    """The sample service's PostgreSQL variant and its database's image (Debian's PostgreSQL on our base)."""
    from harness.containers import images

    service = _built(SAMPLE_DIR / "Dockerfile.postgres", images.ensure_runtime_image(), "sample-orders-pg",
                     (SAMPLE_APP,))
    return service, _built(SAMPLE_DIR / "postgres" / "Dockerfile", images.ensure_base_image(), "sample-orders-db")


# -- a fake scenario and its container twin -----------------------------------------------------------------

CERTIFICATION_SCENARIOS = ROOT / "certification" / "scenarios"
ORDERS_FAULTS = ("response_lost", "server_error_after_commit", "rate_limited", "timeout_late_success")


def twins(source: Path, image: str, folder: Path, *, ledger: dict[str, Any] | None = None, agent_log: str | None = None,
          health_timeout: float = 30.0, options: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """The scenario at ``source`` twice, differing only in what serves its `api: orders` destinations: the fake,
    and the sample service's ``image`` with its ``ledger`` probe. A fake's own failure (which a team's service
    cannot be told to make) becomes the proxy's fault on the same request in both: `error_after_commit` at the
    nth write is `replace_status` on the nth POST, after the destination committed. ``options``: more of the
    container destination's (a database, its environment). ``agent_log``: the twins' (events: the mode of an
    agent that writes its audit log, whose intents then leave the client reference to the agent, which tags its
    write with its operation id)."""
    import yaml

    data = yaml.safe_load(source.read_text())
    if agent_log is not None:
        data["agent_log"] = agent_log
    if data.get("agent_log", "events") == "events":  # an agent with a log tags its write with its operation id
        for intent in data["intents"]:
            intent["params"].pop("client_reference", None)
    for name, spec in data["destinations"].items():
        if spec.get("api") != "orders":
            continue
        for failure in spec.pop("failures", []):
            assert failure["fault"] == "error_after_commit", f"{source}: no proxy twin for {failure}"
            data.setdefault("faults", []).append({
                "id": f"{name}_error_after_commit_{failure['at']}",
                "match": {"destination": name, "method": "POST", "path": "/orders", "nth": failure["at"]},
                "action": "replace_status", "status": failure.get("status") or 500,
                "body": '{"error": "internal_error", "message": "the destination failed"}'})
    fake = dict(data, name=f"{data['name']}_fake")
    container = dict(data, name=f"{data['name']}_container", destinations={
        name: ({**spec, "image": image, "port": 8080, "health": {"path": "/healthz", "timeout_seconds": health_timeout},
                "ledger": ledger or HTTP_LEDGER, **(options or {})} if spec.get("api") == "orders" else spec)
        for name, spec in data["destinations"].items()})
    paths = []
    for scenario in (fake, container):
        path = folder / f"{scenario['name']}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        paths.append(path)
    return paths[0], paths[1]


def verdict_of(result: Any) -> tuple[bool, tuple[str, ...]]:
    """What the certification compares: passed, and the sorted finding codes (each code once)."""
    assert not result.incomplete, f"{result.scenario}: INCOMPLETE: {result.incomplete} ({result.evidence_dir})"
    return bool(result.passed), tuple(sorted({f.code for f in result.verdict.findings}))
