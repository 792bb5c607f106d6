// The Vercel AI SDK's tool loop, defaults (_ai_sdk_tools.cjs: a ToolLoopAgent, a scripted model that calls a failed
// tool again, as models do), its create_order tool a plain POST of the order: each call of the model's is a new
// order, so the model's retry of a tool whose outcome it cannot know is a second one.
const { placeOrder } = require("./_ai_sdk_tools.cjs");
const { fetchWithTimeout, run } = require("./_harness.cjs");

async function createOrder(url, params) {
  return placeOrder(params, async (order) => {
    const answer = await fetchWithTimeout(url + "/orders", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(order) });
    if (!answer.ok) throw new Error(`HTTP ${answer.status}: ${await answer.text()}`);
    return (await answer.json()).id;
  });
}

run(createOrder, { report: true });
