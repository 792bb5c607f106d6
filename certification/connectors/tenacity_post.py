"""tenacity around a requests POST, as it is usually written: any exception (a lost answer, a timeout, and
raise_for_status's HTTPError on a 5xx or a 429) retried, 3 attempts, exponential waits from 0.5 s; no key,
and Retry-After unread."""

import requests
from _harness import TIMEOUT, run
from tenacity import retry, stop_after_attempt, wait_exponential


@retry(stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.5, max=4), reraise=True)
def post(url, params):
    answer = requests.post(url + "/orders", json=params, timeout=TIMEOUT)
    answer.raise_for_status()
    return answer.json()["id"]


run(post)
