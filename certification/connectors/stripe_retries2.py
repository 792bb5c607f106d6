"""stripe-python's StripeClient with max_network_retries=2: it retries a lost answer, a timeout, a 409 and
a 5xx (unless Stripe-Should-Retry: false) with the same Idempotency-Key; it never retries a 429 unless the
answer says Stripe-Should-Retry: true, and it ignores Retry-After (it sleeps 0.5 s, then up to 1 s)."""

import stripe
from _harness import TIMEOUT, run


def create_payment_intent(url, params):
    client = stripe.StripeClient("sk_test_harness", base_addresses={"api": url}, max_network_retries=2,
                                 http_client=stripe.RequestsClient(timeout=TIMEOUT))
    return client.v1.payment_intents.create(params=params).id


run(create_payment_intent)
