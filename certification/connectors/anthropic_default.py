"""The anthropic SDK, defaults: max_retries=2 on a lost answer, a timeout, 408, 409, 429 and 5xx, honouring
Retry-After / retry-after-ms; no Idempotency-Key (the API takes none)."""

import anthropic
from _harness import TIMEOUT, run


def create_message(url, params):
    client = anthropic.Anthropic(api_key="sk-ant-harness", base_url=url, timeout=TIMEOUT)
    return client.messages.create(**params).id


run(create_message)
