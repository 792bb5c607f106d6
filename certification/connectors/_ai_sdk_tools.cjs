// What the AI SDK tool-loop rows share: a ToolLoopAgent (the SDK's tool loop, its defaults: up to 20 steps) with one
// tool, create_order, and a model scripted with the SDK's own test model (MockLanguageModelV4, from ai/test) to do
// what a model does with a tool: call it with the order, call it again when its result is an error (up to CALLS
// calls in all), and answer with the order's id once it succeeds. The loop hands a tool that threw back to the model
// as an error result, so the model's next call is the retry: a new tool call id, the same arguments. The rows differ
// only in their tool's `execute`, and report what the agent told its caller (H049 holds it against the ledger).
const { ToolLoopAgent, jsonSchema, tool } = require("ai");
const { MockLanguageModelV4 } = require("ai/test");

const CALLS = 3;
const USAGE = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
                outputTokens: { total: 5, text: 5, reasoning: 0 } };
const ORDER = jsonSchema({ type: "object", required: ["item", "quantity", "client_reference"], properties: {
  item: { type: "string" }, quantity: { type: "integer" }, client_reference: { type: "string" } } });

function answer(text) {
  return { content: [{ type: "text", text }], usage: USAGE, finishReason: { unified: "stop", raw: "stop" },
           warnings: [] };
}

function scriptedModel(order) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const results = prompt.filter((m) => m.role === "tool").flatMap((m) => m.content)
        .filter((part) => part.type === "tool-result");
      const last = results.at(-1);
      if (last && !last.output.type.startsWith("error")) return answer(`placed ${last.output.value}`);
      if (results.length === CALLS) return answer(`could not place the order: ${last.output.value}`);
      return { content: [{ type: "tool-call", toolCallId: `call_${results.length + 1}`, toolName: "create_order",
                           input: JSON.stringify(order) }],
               usage: USAGE, finishReason: { unified: "tool-calls", raw: "tool_calls" }, warnings: [] };
    },
  });
}

/** The agent asked to place `order`, its tool `execute(order)`: what it tells its caller, the order its tool last
 * returned, or (no call of the tool succeeded) an error with the model's last words. */
async function placeOrder(order, execute) {
  const agent = new ToolLoopAgent({
    model: scriptedModel(order),
    tools: { create_order: tool({ description: "Place an order", inputSchema: ORDER, execute }) },
  });
  const result = await agent.generate({ prompt: `Place order ${order.client_reference}` });
  const placed = result.steps.flatMap((step) => step.toolResults);
  if (!placed.length) throw new Error(result.text);
  return placed.at(-1).output;
}

module.exports = { placeOrder };
