"""The anthropic SDK with max_retries=0, and a 429 (the API did nothing) retried by the caller after its
Retry-After: no blind retry of a message that may have been made and billed; a 5xx told to its caller as
unknown (it may have been made), not failed."""

import time

import anthropic
from _harness import TIMEOUT, OutcomeUnknown, run


def create_message(url, params):
    client = anthropic.Anthropic(api_key="sk-ant-harness", base_url=url, timeout=TIMEOUT, max_retries=0)
    for attempt in range(3):
        try:
            return client.messages.create(**params).id
        except anthropic.RateLimitError as exc:
            if attempt == 2:
                raise
            time.sleep(float(exc.response.headers.get("retry-after", 1)))
        except anthropic.InternalServerError as exc:  # a 5xx: the message may have been made; not said failed
            raise OutcomeUnknown(f"{exc.status_code}: {exc}") from exc


run(create_message)
