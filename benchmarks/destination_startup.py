"""Start-up time of DestinationHost (spawn to READY line): `python benchmarks/destination_startup.py [all] [ssh]`."""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fake_destinations.host import DestinationHost  # noqa: E402

RUNS = 11


def main(argv: list[str]) -> None:
    specs: dict[str, dict] = {"tickets": {"service": "tickets"}}
    if "all" in argv:
        specs.update({s: {"service": s} for s in ("payments", "accounts", "webhooks", "vms", "email", "deployments")})
    if "ssh" in argv:
        specs["ssh"] = {"service": "ssh"}
    times = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as folder:
            with DestinationHost(specs, Path(folder) / "ledger.sqlite") as host:
                times.append(host.startup_seconds)
    print(f"{len(specs)} destination(s) {sorted(specs)}: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) over {RUNS} starts")


if __name__ == "__main__":
    main(sys.argv[1:])
