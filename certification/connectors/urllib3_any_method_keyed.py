"""urllib3_any_method with an Idempotency-Key per order: urllib3 resends the same headers on each retry, so
the orders API replays the first answer instead of placing the order again; a 5xx answer told to its caller
as unknown (the order may exist), not failed."""

import uuid

import urllib3
from _harness import TIMEOUT, OutcomeUnknown, run
from urllib3.util.retry import Retry

http = urllib3.PoolManager(retries=Retry(allowed_methods=None), timeout=urllib3.Timeout(connect=TIMEOUT, read=TIMEOUT))


def create_order(url, params):
    answer = http.request("POST", url + "/orders", json=params, headers={"Idempotency-Key": str(uuid.uuid4())})
    if answer.status >= 500:  # the order may exist: not said failed
        raise OutcomeUnknown(f"{answer.status}: {answer.data.decode()}")
    if answer.status >= 400:  # urllib3 returns an error answer (it raises only on its own retries' end)
        raise urllib3.exceptions.HTTPError(f"{answer.status}: {answer.data.decode()}")
    return answer.json()["id"]


run(create_order)
