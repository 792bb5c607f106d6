"""urllib3 with Retry(allowed_methods=None): every method is retried, POST included, on a lost answer and a
timeout (up to 10 times, no backoff), and on a 413/429/503 that carries Retry-After (which it honours); no
key, so each retry is a new order."""

import urllib3
from _harness import TIMEOUT, run
from urllib3.util.retry import Retry

http = urllib3.PoolManager(retries=Retry(allowed_methods=None), timeout=urllib3.Timeout(connect=TIMEOUT, read=TIMEOUT))


def create_order(url, params):
    answer = http.request("POST", url + "/orders", json=params)
    if answer.status >= 400:  # urllib3 returns an error answer (it raises only on its own retries' end)
        raise urllib3.exceptions.HTTPError(f"{answer.status}: {answer.data.decode()}")
    return answer.json()["id"]


run(create_order)
