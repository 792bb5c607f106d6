"""backoff around a requests POST, as it is usually written: on_exception(expo, RequestException,
max_tries=3), full jitter (a wait anywhere from 0 to 1 s, then 2 s); no key, and Retry-After unread."""

import backoff
import requests
from _harness import TIMEOUT, run


@backoff.on_exception(backoff.expo, requests.RequestException, max_tries=3)
def post(url, params):
    answer = requests.post(url + "/orders", json=params, timeout=TIMEOUT)
    answer.raise_for_status()
    return answer.json()["id"]


run(post)
