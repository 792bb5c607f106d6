"""The operation a framework's tool runs in: ``run_intents`` (tools.py) opens one around each framework run,
a traced one (traced.py), an MCP one (mcp_tools.py) or harness.instrument's, and the tool asks for it here.
A module of its own so that the scopes and the tools need not import each other.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_EXECUTIONS = 3  # each framework's budget for one tool call: the first execution and two retries

_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("framework_operation", default=None)
_OPEN: list[Any] = []  # the scopes open in this process (one intent at a time), for a tool run in another thread


@contextmanager
def opened(op: Any) -> Iterator[Any]:
    """While the block runs, ``op`` is the operation the tools of this context (and of this process) run in."""
    token = _CURRENT.set(op)
    _OPEN.append(op)
    try:
        yield op
    finally:
        _OPEN.remove(op)
        _CURRENT.reset(token)


def current() -> Any:
    """The scope open in this context, else the only one open in this process (a framework that runs its tool
    in a thread of its own), else None."""
    op = _CURRENT.get()
    return op if op is not None else (_OPEN[0] if len(_OPEN) == 1 else None)
