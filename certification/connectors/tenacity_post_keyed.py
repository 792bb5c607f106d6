"""tenacity_post made safe: one Idempotency-Key for every attempt of an order (made before the retried
call, not inside it), and a wait that is at least the answer's Retry-After; a 5xx told to its caller as unknown
(the order may exist), not failed."""

import uuid

import requests
from _harness import TIMEOUT, OutcomeUnknown, run
from tenacity import retry, stop_after_attempt, wait_exponential

backoff = wait_exponential(multiplier=0.5, max=4)


def wait_retry_after(state):
    answer = getattr(state.outcome.exception(), "response", None)
    asked = answer.headers.get("Retry-After") if answer is not None else None
    return max(backoff(state), float(asked)) if asked else backoff(state)


@retry(stop=stop_after_attempt(3), wait=wait_retry_after, reraise=True)
def post(url, params, key):
    answer = requests.post(url + "/orders", json=params, headers={"Idempotency-Key": key}, timeout=TIMEOUT)
    if answer.status_code >= 500:  # the order may exist: not said failed (tenacity retries it as any error)
        raise OutcomeUnknown(f"{answer.status_code}: {answer.text}")
    answer.raise_for_status()
    return answer.json()["id"]


run(lambda url, params: post(url, params, str(uuid.uuid4())))
