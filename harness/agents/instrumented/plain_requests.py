"""An agent written with plain requests, as a team would write it, instrumented with five lines (marked
``# instrument``). It writes no audit event itself: harness.instrument logs its requests as attempts and
lookups, links its retries, and closes each operation on the evidence.

    python -m harness.agents.instrumented.plain_requests

What the team's code does, per intent: POST the payload with the client reference and the idempotency key
the destination's contract asks for; on an answer it could not read (a lost response, a timeout, a 5xx)
look the effect up by client reference, waiting out the documented index lag, and retry only when the
lookup found nothing or the destination deduplicates the key within its retention; wait out a 429's
Retry-After; poll a 202's status; read back after a success where nothing deduplicates.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import requests

from harness.contract import destination_env_name, secret_env_name
from harness.instrument import Operation, instrument  # instrument

TIMEOUT = (1.0, 1.5)  # connect, read: the catalogue's client timeout
MAX_ATTEMPTS = 3
MAX_RETRY_AFTER = 5.0
UNANSWERED_WAITS = (0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0)  # a lookup the destination did not answer
POLL_WAITS = (0.1, 0.2, 0.3, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0)

KeyFor = Callable[[Operation], str]


class Lost(Exception):
    """The answer never came, or says nothing of the effect (a 5xx): the write may have happened."""


def main(key_for: KeyFor | None = None, timeout_is_failure: bool = False) -> None:
    """``key_for`` and ``timeout_is_failure`` exist for the deliberately wrong variants next to this file."""
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        doc = json.load(f)
    session = requests.Session()
    with instrument() as audit:  # instrument
        for intent in audit.todo(doc["intents"]):  # instrument: skips what an earlier run closed
            contract = doc["destinations"][intent["destination"]]
            with audit.operation(intent, max_attempts=MAX_ATTEMPTS) as op:  # instrument
                try:
                    carry_out(session, intent, contract, op, key_for, timeout_is_failure)
                except requests.RequestException as exc:  # an unknown outcome is for the log, not a crash
                    print(f"{intent['intent_id']}: {type(exc).__name__}: {exc}")


def carry_out(session: requests.Session, intent: dict[str, Any], contract: dict[str, Any], op: Operation,
              key_for: KeyFor | None, timeout_is_failure: bool) -> None:
    kind = contract["operations"][intent["kind"]]
    idem = contract["idempotency"]
    base = os.environ[destination_env_name(intent["destination"])].rstrip("/")
    body = {**(kind.get("body_defaults") or {}), **intent["params"]}
    if kind.get("client_reference_field"):
        body[kind["client_reference_field"]] = op.operation_id  # instrument: the id lookups search by
    headers = auth(intent["destination"])
    url = base + kind["path"].format(**intent["params"])
    if op.last_attempt is not None and op.last_attempt.uncertain:  # instrument: restarted, a write in flight
        if not worth_retrying(session, base, contract, op):
            return
    for _ in range(MAX_ATTEMPTS):
        key = key_for(op) if key_for else op.idempotency_key
        if idem["style"] != "none" and idem.get("body_field"):
            body[idem["body_field"]] = key
        elif idem["style"] != "none":
            headers[idem.get("header") or "Idempotency-Key"] = key
        try:
            response = session.request(kind["method"], url, json=body, headers=headers, timeout=TIMEOUT)
            if response.status_code >= 500:
                raise Lost(f"HTTP {response.status_code}")
        except requests.ConnectTimeout:
            continue  # never connected: nothing was sent
        except (requests.ConnectionError, requests.Timeout, Lost):
            if timeout_is_failure:
                op.resolve("failed", reason="the request failed")
                return
            if not worth_retrying(session, base, contract, op):
                return
            continue
        if response.status_code == 429:
            time.sleep(min(float(response.headers.get("Retry-After", "1")), MAX_RETRY_AFTER))
            continue
        if response.status_code == 409:  # the first request is still being processed under this key
            time.sleep(0.3)
            continue
        if response.status_code == 202:
            poll(session, base, response.json())
        elif response.ok and idem["style"] == "none" and contract.get("lookup"):
            look_up(session, base, contract, op)  # a success does not prove a single effect: read back
        return


def worth_retrying(session: requests.Session, base: str, contract: dict[str, Any], op: Operation) -> bool:
    """After an unknown outcome: False when the lookup found the effect, or when nothing says a retry is
    safe (no answered lookup after the lag, no key deduplicating): the operation then stays unknown."""
    found = look_up(session, base, contract, op) if contract.get("lookup") else None
    if found:
        return False
    return found == [] or dedup_in_force(contract, op)


def look_up(session: requests.Session, base: str, contract: dict[str, Any], op: Operation) -> list[Any] | None:
    """The resources found by client reference; [] when an answered search after the lag found none; None
    when the destination did not answer (no evidence either way)."""
    lookup = contract["lookup"]
    lag = float(lookup.get("lag_seconds") or 0.0)
    sent = op.last_attempt.ts if op.last_attempt else time.time()
    unanswered = list(UNANSWERED_WAITS)
    while True:
        try:
            response = session.get(base + lookup["path"], params={lookup["query_param"]: op.operation_id},
                                   headers=auth(op.destination), timeout=TIMEOUT)
            items = response.json()[lookup["result_field"]] if response.ok else None
        except (requests.RequestException, ValueError, KeyError):
            items = None
        if items:
            return list(items)
        if items is not None and time.time() - sent >= lag * 1.5:
            return []
        if items is None and not unanswered:
            return None
        time.sleep(max(0.2, lag / 2) if items is not None else unanswered.pop(0))


def poll(session: requests.Session, base: str, accepted: dict[str, Any]) -> None:
    for wait in POLL_WAITS:
        time.sleep(wait)
        try:
            status = session.get(base + accepted["operation"]["status_url"], timeout=TIMEOUT).json().get("status")
        except (requests.RequestException, ValueError):
            continue
        if status in ("succeeded", "failed"):
            return


def dedup_in_force(contract: dict[str, Any], op: Operation) -> bool:
    idem = contract["idempotency"]
    if idem["style"] == "none":
        return False
    retention = idem.get("retention_seconds")
    first = op.attempts[0].ts if op.attempts else time.time()  # instrument: when the first attempt left
    return retention is None or time.time() - first < 0.9 * float(retention)


def auth(destination: str) -> dict[str, str]:
    token = os.environ.get(secret_env_name(destination))
    return {"Authorization": f"Bearer {token}"} if token else {}


if __name__ == "__main__":
    main()
