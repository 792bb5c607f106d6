"""The model of an operation: one truth that the checker replays histories through and the agents act on.

See ``harness.model.operation`` for the states, events, actors and transitions, and
``harness.model.agent`` for what an agent decides from them (may an attempt have acted, which key,
which resolution). Standard library only: agent processes import it.
"""
