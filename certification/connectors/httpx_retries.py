"""httpx with HTTPTransport(retries=3): it retries only a failed connect (ConnectError, ConnectTimeout),
never a request that was sent, so a lost answer, a 5xx or a 429 is the caller's."""

import httpx
from _harness import TIMEOUT, run

client = httpx.Client(transport=httpx.HTTPTransport(retries=3), timeout=TIMEOUT)


def create_order(url, params):
    answer = client.post(url + "/orders", json=params)
    answer.raise_for_status()
    return answer.json()["id"]


run(create_order)
