"""The pytest markers a scenario item carries, by name, with what each says (standard library only: the plugin
registers them at configure time, before anything heavy is imported). ``harness.catalogue.markers`` gives a
scenario its own: the transports of its destinations and the families of its faults (``FaultRule.family``)."""

from __future__ import annotations

TRANSPORT_MARKERS = {
    "http": "a scenario whose destinations are reached over HTTP",
    "ssh": "a scenario on an SSH host",
    "mcp": "a scenario on an MCP tool server",
}
FAMILY_MARKERS = {
    "lost_response": "the answer to a write that committed never reaches the client",
    "lost_request": "a write never reaches the destination, and the client cannot tell",
    "slow_answer": "an answer arrives past the client's timeout",
    "error_answer": "an error answer (a 5xx, an MCP error result), before or after the commit",
    "rate_limited": "a 429 with Retry-After",
    "broken_answer": "an answer cut short or malformed",
    "duplicate_delivery": "the network delivers a write twice",
    "read_fault": "a fault on a read or a lookup",
    "crash": "the agent is killed mid-flight and started again",
    "destination_restart": "the destination crashes and comes back",
    "async": "an asynchronous write (202 and an operation to poll)",
}
MARKERS = {**TRANSPORT_MARKERS, **FAMILY_MARKERS}
