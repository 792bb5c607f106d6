"""requests with the usual retry recipe: an HTTPAdapter whose urllib3 Retry retries any method (POST
included) on a lost answer, a timeout and a 429/500/502/503/504, with backoff and Retry-After honoured;
no key, so a retry after a commit places the order again."""

import requests
from _harness import TIMEOUT, run
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=Retry(total=3, backoff_factor=0.5, allowed_methods=None,
                                                       status_forcelist=[429, 500, 502, 503, 504])))


def create_order(url, params):
    answer = session.post(url + "/orders", json=params, timeout=TIMEOUT)
    answer.raise_for_status()
    return answer.json()["id"]


run(create_order)
