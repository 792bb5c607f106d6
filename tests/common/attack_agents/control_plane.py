"""An agent under test that attacks the harness, then does its work (the reference agent's, or a wrong one's).

    python -m tests.common.attack_agents.control_plane MODE PORT [PORT...]

The ports are every port the run's destination process listens on (the test reads them from /proc): where
an admin app answered before the control plane left the network. MODE:

- ``reset``: before its work, ask each port for the state, to advance the clock and to reset (the scan of
  issue 30), then work as the reference agent does;
- ``duplicate-then-reset``: work as new_key_per_attempt (a duplicate ticket), then try to reset the
  ledgers to wipe the duplicate's ground truth;
- ``bypass``: create the ticket straight at the destination's port, past the fault proxy, then work as
  the reference agent does.

    python -m tests.common.attack_agents.control_plane MODE LEDGER_FILE

- ``duplicate-then-delete``, ``duplicate-then-replay``, ``duplicate-then-clear``: work as new_key_per_attempt
  (a duplicate ticket), then hide the duplicate in the live SQLite ledger the destination process writes
  (a process of the same user can open it): delete its effect row, mark it a replay, or clear the tables.

What each probe got is written, one JSON line each, to stderr (agent.stderr in the evidence).
"""

from __future__ import annotations

import json
import sqlite3
import sys

import requests

from harness.agents.reference import Agent, main
from harness.agents.wrong.new_key_per_attempt import NewKeyPerAttempt

PROBES = (("GET", "/state", None), ("POST", "/clock", {"advance": 86400}), ("POST", "/reset", {}))


def probe(ports: list[int]) -> None:
    for port in ports:
        for method, path, body in PROBES:
            try:
                response = requests.request(method, f"http://127.0.0.1:{port}{path}", json=body, timeout=2)
                said = {"port": port, "probe": f"{method} {path}", "status": response.status_code,
                        "body": response.text[:200]}
            except requests.RequestException as exc:
                said = {"port": port, "probe": f"{method} {path}", "error": type(exc).__name__}
            print(json.dumps(said), file=sys.stderr, flush=True)


def bypass(ports: list[int]) -> None:
    for port in ports:
        try:
            response = requests.post(f"http://127.0.0.1:{port}/tickets", timeout=2,
                                     headers={"Idempotency-Key": "side-door-1"},
                                     json={"title": "printer on fire", "project": "ops",
                                           "client_reference": "side-door"})
            said = {"port": port, "probe": "POST /tickets", "status": response.status_code,
                    "body": response.text[:200]}
        except requests.RequestException as exc:
            said = {"port": port, "probe": "POST /tickets", "error": type(exc).__name__}
        print(json.dumps(said), file=sys.stderr, flush=True)


class Attacker(Agent):
    def run(self) -> int:
        mode, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
        if mode == "bypass":
            bypass(ports)
        else:
            probe(ports)
        return super().run()


class DuplicateThenReset(NewKeyPerAttempt):
    def run(self) -> int:
        status = super().run()
        probe([int(p) for p in sys.argv[2:]])
        return status


HIDE = {"duplicate-then-delete": ["DELETE FROM effects WHERE seq = (SELECT MAX(seq) FROM effects)"],
        "duplicate-then-replay": ["UPDATE effects SET replay = 1 WHERE seq = (SELECT MAX(seq) FROM effects)"],
        "duplicate-then-clear": ["DELETE FROM effects", "DELETE FROM requests", "DELETE FROM sqlite_sequence"]}


class DuplicateThenEditLedger(NewKeyPerAttempt):
    def run(self) -> int:
        status = super().run()
        db = sqlite3.connect(sys.argv[2], isolation_level=None, timeout=5)
        try:
            for statement in HIDE[sys.argv[1]]:
                changed = db.execute(statement).rowcount
                print(json.dumps({"ledger": statement, "rows": changed}), file=sys.stderr, flush=True)
        finally:
            db.close()
        return status


if __name__ == "__main__":
    main(DuplicateThenReset if sys.argv[1] == "duplicate-then-reset" else
         DuplicateThenEditLedger if sys.argv[1] in HIDE else Attacker)
