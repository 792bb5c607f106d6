"""What a generic destination costs per request against the built-in service it can replace, in the same run.

    python benchmarks/api_destination_bench.py [--requests 2000]

`tickets` (built in) and `api: orders` (the bundled profile: the same contract, declared) are served by one
destination process; the same client alternates rounds between them: a keyed create, its replay, a read and
a lookup. Prints the median per-request time of each and the ratio (generic / built-in). The machines are
noisy: compare the ratio, not the milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fake_destinations.host import DestinationHost  # noqa: E402

ROUND = 4  # requests per round: create, replay, read, lookup


def one_round(session: requests.Session, base: str, collection: str, n: int, params: dict[str, object]) -> float:
    began = time.perf_counter()
    body = {**params, "client_reference": f"ref-{n}"}
    created = session.post(f"{base}{collection}", json=body, headers={"Idempotency-Key": f"k-{n}"}, timeout=5)
    session.post(f"{base}{collection}", json=body, headers={"Idempotency-Key": f"k-{n}"}, timeout=5)
    session.get(f"{base}{collection}/{created.json()['id']}", timeout=5)
    session.get(f"{base}{collection}", params={"client_reference": f"ref-{n}"}, timeout=5)
    return (time.perf_counter() - began) / ROUND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per destination (default 2000)")
    args = parser.parse_args()
    rounds = max(1, args.requests // ROUND)
    specs = {"tickets": {"service": "tickets"}, "orders": {"api": "orders"}}
    with tempfile.TemporaryDirectory() as folder, DestinationHost(specs, Path(folder) / "ledger.sqlite") as host:
        session = requests.Session()
        times: dict[str, list[float]] = {"tickets": [], "orders": []}
        for n in range(rounds):  # interleaved, so that both see the same machine
            times["tickets"].append(one_round(session, host.urls["tickets"], "/tickets", n,
                                              {"title": "t", "project": "OPS"}))
            times["orders"].append(one_round(session, host.urls["orders"], "/orders", n, {"item": "i", "quantity": 1}))
    built_in, generic = (statistics.median(times[k]) * 1000 for k in ("tickets", "orders"))
    print(f"{rounds * ROUND} requests each: built-in tickets {built_in:.2f} ms median per request, generic "
          f"`api: orders` {generic:.2f} ms: {generic / built_in:.2f}x")


if __name__ == "__main__":
    main()
