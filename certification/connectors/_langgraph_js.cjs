// What the LangGraph.js rows share: a StateGraph of one node, place_order, that carries out the order in the graph's
// state (the intent's params) and writes the order's id back, under the RetryPolicy the row gives it (the node's
// `retryPolicy`: LangGraph.js runs the node again, the same state in, when an attempt throws and the policy's
// `retryOn` says so). The rows differ only in the node and its policy; what the graph's caller is told is the id the
// node wrote, or the error of the node's last attempt (LangGraph.js throws that very error).
const { Annotation, END, START, StateGraph } = require("@langchain/langgraph");

const OrderState = Annotation.Root({ order: Annotation(), orderId: Annotation() });

/** `node(state, config)` run as place_order under `retryPolicy` on `order`: the id it wrote to the state. */
async function placeOrder(order, retryPolicy, node) {
  const graph = new StateGraph(OrderState)
    .addNode("place_order", node, { retryPolicy })
    .addEdge(START, "place_order")
    .addEdge("place_order", END)
    .compile();
  return (await graph.invoke({ order })).orderId;
}

module.exports = { placeOrder };
