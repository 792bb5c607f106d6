"""requests, plain: no retries at all (its HTTPAdapter's max_retries=0)."""

import requests
from _harness import TIMEOUT, run


def create_order(url, params):
    answer = requests.post(url + "/orders", json=params, timeout=TIMEOUT)
    answer.raise_for_status()
    return answer.json()["id"]


run(create_order)
