"""stripe-python's StripeClient, defaults: no network retries (max_network_retries unset means 0 on a
StripeClient; the global stripe.max_network_retries=2 applies to the legacy global API only), an
Idempotency-Key on every POST all the same."""

import stripe
from _harness import TIMEOUT, run


def create_payment_intent(url, params):
    client = stripe.StripeClient("sk_test_harness", base_addresses={"api": url},
                                 http_client=stripe.RequestsClient(timeout=TIMEOUT))
    return client.v1.payment_intents.create(params=params).id


run(create_payment_intent)
