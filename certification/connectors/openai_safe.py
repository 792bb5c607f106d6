"""The openai SDK with max_retries=0, and a 429 (the API did nothing) retried by the caller after its
Retry-After: no blind retry of a completion that may have been made and billed; a 5xx told to its caller as
unknown (it may have been made), not failed."""

import time

import openai
from _harness import TIMEOUT, OutcomeUnknown, run


def create_chat_completion(url, params):
    client = openai.OpenAI(api_key="sk-harness", base_url=url + "/v1", timeout=TIMEOUT, max_retries=0)
    for attempt in range(3):
        try:
            return client.chat.completions.create(**params).id
        except openai.RateLimitError as exc:
            if attempt == 2:
                raise
            time.sleep(float(exc.response.headers.get("retry-after", 1)))
        except openai.InternalServerError as exc:  # a 5xx: the completion may have been made; not said failed
            raise OutcomeUnknown(f"{exc.status_code}: {exc}") from exc


run(create_chat_completion)
