"""backoff_post made safe: one Idempotency-Key for every attempt of an order, and a 429 waited out as its
Retry-After asks (backoff.runtime) by a second decorator, as backoff's documentation stacks them; a 5xx told to
its caller as unknown (the order may exist), not failed."""

import uuid

import backoff
import requests
from _harness import TIMEOUT, OutcomeUnknown, run


class RateLimited(Exception):
    def __init__(self, answer):
        super().__init__(f"429, Retry-After {answer.headers.get('Retry-After')}")
        self.retry_after = float(answer.headers.get("Retry-After", 1))


@backoff.on_exception(backoff.expo, (requests.RequestException, OutcomeUnknown), max_tries=3)
@backoff.on_exception(backoff.runtime, RateLimited, value=lambda exc: exc.retry_after, jitter=None, max_tries=3)
def post(url, params, key):
    answer = requests.post(url + "/orders", json=params, headers={"Idempotency-Key": key}, timeout=TIMEOUT)
    if answer.status_code == 429:
        raise RateLimited(answer)
    if answer.status_code >= 500:  # the order may exist: not said failed (retried with the key, as before)
        raise OutcomeUnknown(f"{answer.status_code}: {answer.text}")
    answer.raise_for_status()
    return answer.json()["id"]


run(lambda url, params: post(url, params, str(uuid.uuid4())))
