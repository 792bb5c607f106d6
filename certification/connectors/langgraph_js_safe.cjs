// LangGraph.js's RetryPolicy around a node made safe in itself: an Idempotency-Key made from the order's
// client_reference in the graph's state (the same on every attempt the policy makes; LangGraph.js gives a retried
// node the same state), a retryOn that runs the node again only when nothing was done (a 429) or the outcome is
// unknown, a 429 waited out for its Retry-After before the policy's own backoff, and after no answer, a timeout or a
// 5xx the lookup (GET /orders?client_reference=) before any retry: an order found is the node's result. An outcome
// still unknown when the attempts are spent is told to the caller as unknown (the API replays a stored 500 for the
// key: the key alone would say "failed" while the order exists).
const { OutcomeUnknown, fetchWithTimeout, run, sleep } = require("./_harness.cjs");
const { placeOrder } = require("./_langgraph_js.cjs");

/** A 429: the API did nothing; the policy's next attempt comes after its Retry-After. */
class RateLimited extends Error {
  name = "RateLimited";
}

const RETRY = { maxAttempts: 3, retryOn: (error) => error instanceof OutcomeUnknown || error instanceof RateLimited };

async function createOrder(url, order) {
  return placeOrder(order, RETRY, async ({ order }, { signal }) => {
    const reference = order.client_reference;
    const answer = await fetchWithTimeout(url + "/orders", {
      method: "POST", body: JSON.stringify(order), signal,
      headers: { "content-type": "application/json", "idempotency-key": `order-key-${reference}` },
    }).catch((error) => ({ status: 0, error }));  // no answer: the order may exist
    if (answer.ok) return { orderId: (await answer.json()).id };
    const said = answer.error ? `no answer (${answer.error})` : `HTTP ${answer.status}: ${await answer.text()}`;
    if (answer.status === 429) {
      await sleep(Number(answer.headers.get("retry-after") ?? 1));
      throw new RateLimited(said);
    }
    if (answer.status > 0 && answer.status < 500) throw new Error(said);  // refused: a retry would be refused too
    try {
      const found = await fetchWithTimeout(url + "/orders?client_reference=" + encodeURIComponent(reference), { signal });
      const { items } = found.ok ? await found.json() : { items: [] };
      if (items.length) return { orderId: items[0].id };
    } catch {}  // no answer from the lookup either: the key keeps the policy's retry safe
    throw new OutcomeUnknown(`${said}, and no order ${reference} found: it may exist`);
  });
}

run(createOrder);
