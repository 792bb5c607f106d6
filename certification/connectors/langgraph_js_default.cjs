// LangGraph.js (@langchain/langgraph), a node that POSTs the order with no key, under the default RetryPolicy
// (`retryPolicy: {}`: 3 attempts, 0.5 s then 1 s apart plus up to 1 s of jitter, a Retry-After unread). Its default
// retryOn runs the node again after any error but an abort, a GraphValueError and an HTTP status of 400-407 or 409
// read from the error: after no answer, a timeout (the fetch's TimeoutError is no AbortError), a 500 and a 429.
const { fetchWithTimeout, run } = require("./_harness.cjs");
const { placeOrder } = require("./_langgraph_js.cjs");

async function createOrder(url, order) {
  return placeOrder(order, {}, async (state, config) => {
    const answer = await fetchWithTimeout(url + "/orders", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(state.order),
      signal: config.signal });
    if (!answer.ok) throw Object.assign(new Error(`HTTP ${answer.status}: ${await answer.text()}`), { status: answer.status });
    return { orderId: (await answer.json()).id };
  });
}

run(createOrder);
