"""kind: wrong
flaw: MCP: a call whose result never came (transport error, timeout) is logged as an error result (response_received, tool_error)
should: H005, H028
scenarios: mcp_tool_result_lost, mcp_slow_result, mcp_annotation_contradicted

The agent's tool wrapper turns every exception into an `isError` result, as many frameworks do before
handing it to the model; it then reconciles correctly. The log says an answer came where none did
(contract section 4, MCP: sent_no_response when the call raised or timed out after the request was
written; response_received only for a result; H005, H028).
"""
import sys

from base import Agent, Outcome


class Flawed(Agent):
    def call_tool(self, op, name, arguments, meta):
        outcome = super().call_tool(op, name, arguments, meta)
        if outcome.state == "sent_no_response":
            return Outcome("response_received", 200, {"error": outcome.error}, None, outcome.error, True)
        return outcome


if __name__ == "__main__":
    sys.exit(Flawed().run())
