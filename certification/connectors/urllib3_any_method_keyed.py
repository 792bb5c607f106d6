"""urllib3_any_method with an Idempotency-Key per order: urllib3 resends the same headers on each retry, so
the orders API replays the first answer instead of placing the order again."""

import uuid

import urllib3
from _harness import TIMEOUT, run
from urllib3.util.retry import Retry

http = urllib3.PoolManager(retries=Retry(allowed_methods=None), timeout=urllib3.Timeout(connect=TIMEOUT, read=TIMEOUT))


def create_order(url, params):
    answer = http.request("POST", url + "/orders", json=params, headers={"Idempotency-Key": str(uuid.uuid4())})
    return answer.status, answer.data.decode()


run(create_order)
