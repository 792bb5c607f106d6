"""requests_retry_adapter with an Idempotency-Key per order: urllib3 resends the same headers on each
retry, so the orders API replays the first answer instead of placing the order again; a 5xx that outlasts the
retries told to its caller as unknown (the order may exist), not failed."""

import uuid

import requests
from _harness import TIMEOUT, OutcomeUnknown, run
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=Retry(total=3, backoff_factor=0.5, allowed_methods=None,
                                                       status_forcelist=[429, 500, 502, 503, 504])))


def create_order(url, params):
    try:
        answer = session.post(url + "/orders", json=params, headers={"Idempotency-Key": str(uuid.uuid4())},
                              timeout=TIMEOUT)
    except requests.exceptions.RetryError as exc:  # the retries ran out on error answers (a 5xx: the order may exist)
        raise OutcomeUnknown(str(exc)) from exc
    answer.raise_for_status()
    return answer.json()["id"]


run(create_order)
