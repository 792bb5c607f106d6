"""A LangGraph agent: a model node (scripted: one tool call per intent, no network) and a ToolNode, the
retry on the tool node.

    python -m harness.agents.frameworks.langgraph_agent            # RetryPolicy(retry_on=SafeToRetry)
    python -m harness.agents.frameworks.langgraph_agent --wrong    # RetryPolicy(retry_on=Exception)

LangGraph retries a node by running it again with the same input: the ToolNode executes the same tool call
(same call id) once more. The correct agent lets it retry only what is safe (SafeToRetry: nothing sent, a
429 waited out, or an unknown outcome the next execution looks up first), and its tool sends the operation's
key and reference every time. ``--wrong`` is the setting teams write, ``retry_on=Exception``, around a tool
that POSTs its arguments: a lost answer, a 500 or a timeout becomes a second write.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import RetryPolicy

from harness.agents.frameworks.tools import (
    SafeToRetry,
    ToolSpec,
    call_id,
    carry_out,
    parse_mode,
    post_blindly,
    run_intents,
)


def build(intent: dict[str, Any], spec: ToolSpec, wrong: bool) -> Any:
    body = post_blindly if wrong else carry_out
    tool = StructuredTool.from_function(lambda **params: body(spec, params), name=spec.name,
                                        description=spec.description, args_schema=spec.json_schema)

    def model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        """The scripted chat model: the intent's tool call first, then a final answer naming the result."""
        answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if not answers:
            return {"messages": [AIMessage("", tool_calls=[{"name": spec.name, "args": dict(intent["params"]),
                                                            "id": call_id(intent, 1)}])]}
        return {"messages": [AIMessage(f"{answers[-1].content}")]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    retry = RetryPolicy(retry_on=Exception) if wrong else RetryPolicy(retry_on=SafeToRetry)
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    # handle_tool_errors=False: a tool's exception reaches the node's RetryPolicy (the default handler would
    # turn only invalid arguments into a message and raise the rest anyway)
    graph.add_node("tools", ToolNode([tool], handle_tool_errors=False), retry_policy=retry)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


def main(argv: list[str] | None = None) -> None:
    wrong = parse_mode(argv, __doc__).wrong

    def run_one(intent: dict[str, Any], spec: ToolSpec) -> str:
        state = build(intent, spec, wrong).invoke({"messages": [HumanMessage(f"carry out {intent['intent_id']}")]})
        return str(state["messages"][-1].content)

    run_intents(run_one)


if __name__ == "__main__":
    main(sys.argv[1:])
