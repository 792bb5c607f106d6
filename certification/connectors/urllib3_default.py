"""urllib3 with Retry() defaults (what PoolManager() uses too): POST is not in allowed_methods, so a POST
is never retried, whatever the fault."""

import urllib3
from _harness import TIMEOUT, run
from urllib3.util.retry import Retry

http = urllib3.PoolManager(retries=Retry(), timeout=urllib3.Timeout(connect=TIMEOUT, read=TIMEOUT))


def create_order(url, params):
    answer = http.request("POST", url + "/orders", json=params)
    if answer.status >= 400:  # urllib3 returns an error answer (it raises only on its own retries' end)
        raise urllib3.exceptions.HTTPError(f"{answer.status}: {answer.data.decode()}")
    return answer.json()["id"]


run(create_order)
