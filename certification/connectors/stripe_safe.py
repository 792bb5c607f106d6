"""stripe_retries2, and a 429 retried by the caller after its Retry-After with the same idempotency key
(stripe-python does not retry a 429 by itself), and a 5xx that outlasts the retries told to its caller as unknown
(the charge may exist; the caller retries with the key): safe and complete under every fault of the matrix."""

import time
import uuid

import stripe
from _harness import TIMEOUT, OutcomeUnknown, run


def create_payment_intent(url, params):
    client = stripe.StripeClient("sk_test_harness", base_addresses={"api": url}, max_network_retries=2,
                                 http_client=stripe.RequestsClient(timeout=TIMEOUT))
    options = {"idempotency_key": str(uuid.uuid4())}  # one key for every try of this payment
    for attempt in range(3):
        try:
            return client.v1.payment_intents.create(params=params, options=options).id
        except stripe.RateLimitError as exc:  # a 429: nothing was done; wait as asked, then try again
            if attempt == 2:
                raise
            time.sleep(float((exc.headers or {}).get("Retry-After", 1)))
        except stripe.APIError as exc:  # a 5xx: the payment may exist; done or not, the key makes a retry safe
            raise OutcomeUnknown(f"{exc.http_status}: {exc}") from exc


run(create_payment_intent)
