"""The anthropic SDK with max_retries=0, and a 429 (the API did nothing) retried by the caller after its
Retry-After: no blind retry of a message that may have been made and billed."""

import time

import anthropic
from _harness import TIMEOUT, run


def create_message(url, params):
    client = anthropic.Anthropic(api_key="sk-ant-harness", base_url=url, timeout=TIMEOUT, max_retries=0)
    for attempt in range(3):
        try:
            return client.messages.create(**params).id
        except anthropic.RateLimitError as exc:
            if attempt == 2:
                raise
            time.sleep(float(exc.response.headers.get("retry-after", 1)))


run(create_message)
