"""Proxies of several harness processes started at once on a fresh machine (pytest-xdist workers, CI jobs on
one runner) share mitmproxy's confdir (``~/.mitmproxy``): its CA is made once, and every proxy signs with the
CA its file holds, so an agent given that file (``SSL_CERT_FILE`` in the -https modes) trusts each of them."""

from __future__ import annotations

import threading
from pathlib import Path

import requests

from harness.proxy import ProxyHost

PROXIES = 3  # started at the same moment, as parallel workers' first scenarios are
ROUNDS = 2  # each with a confdir that has no CA yet


def start_together(confdir: Path) -> tuple[list[ProxyHost], list[str]]:
    hosts = [ProxyHost(confdir=confdir) for _ in range(PROXIES)]
    barrier = threading.Barrier(PROXIES)
    errors: list[str] = []

    def start(host: ProxyHost) -> None:
        barrier.wait()
        try:
            host.start()
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=start, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return hosts, errors


def test_proxies_started_at_once_on_a_fresh_confdir_share_one_ca(destination, tmp_path) -> None:
    for round_ in range(ROUNDS):
        confdir = tmp_path / f"mitmproxy-{round_}"
        hosts, errors = start_together(confdir)
        try:
            assert errors == []
            for number, host in enumerate(hosts):
                routes = host.configure({"tickets": destination.url}, [], tmp_path / f"j-{round_}-{number}.ndjson",
                                        mode="reverse-https")
                assert routes.ca_cert is not None and routes.ca_cert.parent == confdir
                # the agent's view: the CA file it is handed verifies this proxy's certificate
                answer = requests.get(routes.urls["tickets"] + "/tickets", verify=str(routes.ca_cert), timeout=10)
                assert answer.status_code == 200
                host.finish()
        finally:
            for host in hosts:
                host.stop()
