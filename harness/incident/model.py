"""What every incident reader produces, whatever the format: the exchanges on the wire as the client saw
them, and, where the source says so, the operations they belonged to.

Standard library only (readers of formats whose libraries are heavy import them themselves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Exchange:
    """One request as the client sent it and what came back to the client (``status`` None: no answer)."""

    destination: str  # a name (evidence, audit log) or the origin's host:port (HAR, flows)
    method: str
    path: str  # without the query
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # names lower-case
    body: bytes = b""
    started: float | None = None  # unix seconds
    seconds: float | None = None  # how long the client waited
    status: int | None = None  # what the client got; None: nothing (closed, reset, timed out, refused)
    response_headers: dict[str, str] = field(default_factory=dict)  # names lower-case
    response_body: bytes = b""
    error: str | None = None  # why there was no answer, as the source says it ("timeout", "connection closed")
    # where the source knows more than the client saw (the harness's own HAR and flows, an evidence folder)
    upstream_status: int | None = None  # what the destination answered, when it was not what the client got
    fault: str | None = None  # the fault action the harness applied to it
    rule_id: str | None = None  # the id of the scenario's fault rule that fired on it
    operation_id: str | None = None
    line: int | None = None  # where in the source (entry index, log line)


@dataclass
class Incident:
    """An incident as read: its source, its format, its exchanges in time order, and what else it tells."""

    source: str  # the file or folder, as given
    format: str  # evidence | events | article | har | flows
    exchanges: list[Exchange] = field(default_factory=list)
    # the audit log's records by operation (events, article, evidence): operation id -> records in order
    operations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # an evidence folder's context.json (destination specs, intents, secrets, restarts), when there is one
    context: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # what the reader could not read, said in the scenario


class IncidentError(ValueError):
    """A file that is no incident the reader knows: names the file and what was expected (exit 2)."""
