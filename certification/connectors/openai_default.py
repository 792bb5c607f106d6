"""The openai SDK, defaults: max_retries=2 on a lost answer, a timeout, 408, 409, 429 and 5xx, honouring
Retry-After / retry-after-ms; no Idempotency-Key (the API takes none)."""

import openai
from _harness import TIMEOUT, run


def create_chat_completion(url, params):
    client = openai.OpenAI(api_key="sk-harness", base_url=url + "/v1", timeout=TIMEOUT)
    return client.chat.completions.create(**params).id


run(create_chat_completion)
