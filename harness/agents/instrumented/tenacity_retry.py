"""An agent whose POST is wrapped in tenacity, as a team would write it, instrumented with the tenacity hooks
(lines marked ``# instrument``). It writes no audit event itself.

    python -m harness.agents.instrumented.tenacity_retry

tenacity retries what is safe to retry: a connection that never opened, a 429 (after its Retry-After,
through ``tenacity_wait_retry_after``), and a lost answer or a 5xx only while the destination deduplicates
the key within its retention. When tenacity gives up on an unknown outcome, the team's code looks the
effect up by client reference, if the destination has a lookup; otherwise the operation stays unknown.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import requests
import tenacity

from harness.contract import destination_env_name, secret_env_name
from harness.instrument import (  # instrument
    Operation,
    current_operation,
    instrument,
    tenacity_before_sleep,
    tenacity_wait_retry_after,
)

TIMEOUT = (1.0, 1.5)
ATTEMPTS = 3
LOOKUP_WAITS = (0.0, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0)


class RateLimited(Exception):
    pass


class ServerError(Exception):
    pass


def main() -> None:
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        doc = json.load(f)
    session = requests.Session()
    with instrument() as audit:  # instrument
        for intent in audit.todo(doc["intents"]):  # instrument
            contract = doc["destinations"][intent["destination"]]
            with audit.operation(intent, max_attempts=ATTEMPTS) as op:  # instrument
                try:
                    create(session, intent, contract, op)
                except (requests.RequestException, ServerError, RateLimited) as exc:
                    print(f"{intent['intent_id']}: gave up after {type(exc).__name__}: {exc}")
                    if contract.get("lookup"):
                        look_up(session, intent, contract, op)


def safe_to_retry(exc: BaseException) -> bool:
    """Never connected, or rate limited: nothing was done. Otherwise only the key makes a retry safe."""
    if isinstance(exc, (requests.ConnectTimeout, RateLimited)):
        return True
    if isinstance(exc, (requests.ConnectionError, requests.Timeout, ServerError)):
        op = current_operation()  # instrument: the contract and when the first attempt left
        return op is not None and dedup_in_force(op)
    return False


@tenacity.retry(stop=tenacity.stop_after_attempt(ATTEMPTS),
                wait=tenacity_wait_retry_after(tenacity.wait_exponential(multiplier=0.1, max=1.0)),  # instrument
                retry=tenacity.retry_if_exception(safe_to_retry),
                before_sleep=tenacity_before_sleep,  # instrument
                reraise=True)
def post(session: requests.Session, url: str, body: dict[str, Any], headers: dict[str, str]) -> requests.Response:
    response = session.post(url, json=body, headers=headers, timeout=TIMEOUT)
    if response.status_code == 429:
        raise RateLimited(response.headers.get("Retry-After", ""))
    if response.status_code >= 500:
        raise ServerError(f"HTTP {response.status_code}")
    return response


def create(session: requests.Session, intent: dict[str, Any], contract: dict[str, Any], op: Operation) -> None:
    kind = contract["operations"][intent["kind"]]
    idem = contract["idempotency"]
    body = {**(kind.get("body_defaults") or {}), **intent["params"]}
    if kind.get("client_reference_field"):
        body[kind["client_reference_field"]] = op.operation_id
    headers = auth(intent["destination"])
    if idem["style"] != "none" and idem.get("body_field"):
        body[idem["body_field"]] = op.idempotency_key
    elif idem["style"] != "none":
        headers[idem.get("header") or "Idempotency-Key"] = op.idempotency_key
    if op.last_attempt is not None and op.last_attempt.uncertain and not dedup_in_force(op):
        raise ServerError("restarted with a write in flight")  # reconcile, do not send it again
    url = base_url(intent["destination"]) + kind["path"].format(**intent["params"])
    post(session, url, body, headers)


def look_up(session: requests.Session, intent: dict[str, Any], contract: dict[str, Any], op: Operation) -> None:
    """Look until found, or until an answered search comes after the documented lag."""
    lookup = contract["lookup"]
    lag = float(lookup.get("lag_seconds") or 0.0)
    for wait in LOOKUP_WAITS:
        time.sleep(wait)
        try:
            response = session.get(base_url(intent["destination"]) + lookup["path"],
                                   params={lookup["query_param"]: op.operation_id},
                                   headers=auth(intent["destination"]), timeout=TIMEOUT)
        except requests.RequestException:
            continue
        if response.ok and (response.json().get(lookup["result_field"]) or
                            (op.last_attempt is not None and time.time() - op.last_attempt.ts > lag * 1.5)):
            return


def dedup_in_force(op: Operation) -> bool:
    idem = op.contract.idempotency
    first = op.attempts[0].ts if op.attempts else time.time()
    return idem.deduplicates and (idem.retention_seconds is None or time.time() - first < 0.9 * idem.retention_seconds)


def base_url(destination: str) -> str:
    return os.environ[destination_env_name(destination)].rstrip("/")


def auth(destination: str) -> dict[str, str]:
    token = os.environ.get(secret_env_name(destination))
    return {"Authorization": f"Bearer {token}"} if token else {}


if __name__ == "__main__":
    main()
