// The Vercel AI SDK's tool loop with a create_order tool made safe in itself: an Idempotency-Key made from the
// order's client_reference (an argument the model repeats), not from the tool call id (new on each call), so a call
// of the model's again is the same order; a 429 (nothing was done) waited out for its Retry-After and sent again;
// and after an answer that leaves the outcome unknown (none, a timeout, a 5xx: the API replays a stored 500 for the
// key, so the key alone would tell the model "failed" three times while the order exists) the lookup
// (GET /orders?client_reference=) before the model hears of an error: an order found is the tool's result.
const { placeOrder } = require("./_ai_sdk_tools.cjs");
const { fetchWithTimeout, run, sleep } = require("./_harness.cjs");

async function createOrder(url, params) {
  return placeOrder(params, async (order) => {
    const send = () => fetchWithTimeout(url + "/orders", {
      method: "POST", body: JSON.stringify(order),
      headers: { "content-type": "application/json", "idempotency-key": `order-key-${order.client_reference}` } });
    let answer;
    try {
      answer = await send();
      if (answer.status === 429) {
        await sleep(Number(answer.headers.get("retry-after") ?? 1));
        answer = await send();
      }
    } catch (error) {  // no answer: the order may exist
      answer = { ok: false, status: 0, text: async () => String(error) };
    }
    if (answer.ok) return (await answer.json()).id;
    if (answer.status === 0 || answer.status >= 500) {
      const found = await fetchWithTimeout(url + "/orders?client_reference=" + encodeURIComponent(order.client_reference));
      const { items } = found.ok ? await found.json() : { items: [] };
      if (items.length) return items[0].id;
    }
    throw new Error(`HTTP ${answer.status}: ${await answer.text()}`);
  });
}

run(createOrder, { report: true });
