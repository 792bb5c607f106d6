"""What one attempt's outcome says about the destination: the single definition of "may have acted
without the client learning that it did", shared by the agents and the checker's model.

Standard library only (agent processes import it).
"""

from __future__ import annotations

DISPATCH_STATES = ("not_sent", "sent_no_response", "response_received", "execution_error")
# The request may have left and no answer tells what became of it.
UNANSWERED_STATES = frozenset({"sent_no_response", "execution_error"})
# Answers that leave the effect open: accepted for later (202), the first request may still be running
# (409 in progress, 408 timeout, 425 too early).
OPEN_STATUSES = frozenset({202, 408, 409, 425})


def answered_5xx(status: object) -> bool:
    return isinstance(status, int) and not isinstance(status, bool) and status >= 500


def may_have_acted(dispatch_state: str | None, http_status: object = None, *, tool_error: bool = False) -> bool:
    """True when the attempt may have acted without the client learning that it did: no answer after the
    request may have left, a 5xx (the destination may have committed before failing), an answer that leaves
    the first request running or accepted for later (202, 408, 409, 425), or an MCP tool error result
    (the tool may have committed before failing)."""
    if dispatch_state in UNANSWERED_STATES:
        return True
    if dispatch_state != "response_received":
        return False
    return tool_error or answered_5xx(http_status) or http_status in OPEN_STATUSES


def succeeded(dispatch_state: str | None, http_status: object = None, *, tool_error: bool = False) -> bool:
    """An answer that says the destination did it: a 2xx other than 202 (accepted is not done)."""
    return (dispatch_state == "response_received" and not tool_error and isinstance(http_status, int)
            and 200 <= http_status < 300 and http_status != 202)
