"""Reading an incident from whatever the on-call engineer has: an evidence folder of ours, an audit log in
our event format (a production log), the second article's effect-ledger NDJSON, a HAR file, a mitmproxy
flow dump. ``read_incident(path)`` sniffs the format and returns the ``Incident``; a file of none of them
is an ``IncidentError`` naming it and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.contract import CONTEXT_FILE, ContextKey, EvidenceLayout
from harness.incident.model import Exchange, Incident, IncidentError

FORMATS = ("evidence", "events", "article", "har", "flows")
EXPECTED = ("an evidence folder of the harness (with context.json), an audit log in the harness's event format "
            "(NDJSON lines with `event`), the article's effect-ledger NDJSON (lines with `type: attempt|effect`), a "
            "HAR file (JSON with log.entries) or a mitmproxy flow dump (`mitmdump -w`)")


def read_incident(path: Path) -> Incident:
    if path.is_dir():
        if not (path / CONTEXT_FILE).is_file():
            raise IncidentError(f"{path}: a folder, but not an evidence folder of the harness (no {CONTEXT_FILE}); "
                                f"expected {EXPECTED}")
        return read_evidence(path)
    if not path.is_file():
        raise IncidentError(f"{path}: no such file or folder; expected {EXPECTED}")
    fmt = incident_format(path)
    if fmt == "har":
        from harness.incident.har import read_har

        return read_har(path)
    if fmt == "flows":
        from harness.incident.flows import read_flows

        return read_flows(path)
    if fmt in ("events", "article"):
        return read_log(path, fmt)
    raise IncidentError(f"{path}: none of the formats `reproduce` reads; expected {EXPECTED}")


def incident_format(path: Path) -> str | None:
    """The format of a file, from its first bytes: har, flows, events, article, or None."""
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError as exc:
        raise IncidentError(f"{path}: cannot read: {exc.strerror}") from None
    from harness.incident.sniff import incident_format as traffic_format

    traffic = traffic_format(path)  # a HAR, a flow dump: their own sniffer
    if traffic is not None:
        return traffic
    # a log: the first of its first lines that is a record says which (a bad line among them is H000's business)
    for line in [text for text in head.decode("utf-8", errors="replace").splitlines() if text.strip()][:20]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and "event" in record:
            return "events"
        if isinstance(record, dict) and record.get("type") in ("attempt", "effect"):
            return "article"
    return None


def read_log(path: Path, fmt: str) -> Incident:
    """An audit log alone (ours, or the article's): its operations, and the attempts it names as exchanges."""
    from harness.audit.lines import load_log

    evidence = load_log(path)
    incident = Incident(source=str(path), format=fmt)
    for record in evidence.events:
        op = record.get("operation_id")
        if isinstance(op, str):
            incident.operations.setdefault(op, []).append(record)
    if not incident.operations:
        raise IncidentError(f"{path}: no operation in the log ({len(evidence.log_errors)} line(s) that are no "
                            f"event); expected {EXPECTED}")
    for error in evidence.log_errors[:5]:
        incident.notes.append(f"{path}:{error.get('line')}: skipped, not an event: {error.get('error')}")
    return incident


def read_evidence(folder: Path) -> Incident:
    """An evidence folder of the harness: its context (the destinations as declared, the intents, the faults
    and crashes it was set to apply), the journal's flows as exchanges, and the agent log's operations."""
    from harness.evidence import load_evidence

    layout = EvidenceLayout(folder)
    try:
        context = json.loads(layout.context.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IncidentError(f"{layout.context}: cannot read the evidence folder's context: {exc}") from None
    if not isinstance(context, dict) or not isinstance(context.get(ContextKey.DESTINATIONS), dict):
        raise IncidentError(f"{layout.context}: not a harness context (no destinations); expected {EXPECTED}")
    incident = Incident(source=str(folder), format="evidence", context=context)
    evidence = load_evidence(folder)
    for record in evidence.events:
        op = record.get("operation_id")
        if isinstance(op, str):
            incident.operations.setdefault(op, []).append(record)
    incident.exchanges = [_journal_exchange(entry) for entry in evidence.journal]
    if evidence.incomplete:
        incident.notes.append("the run's evidence is incomplete: " + "; ".join(evidence.incomplete))
    return incident


def _journal_exchange(entry: dict[str, Any]) -> Exchange:
    started, done = entry.get("ts_request"), entry.get("ts_done")
    status = entry.get("client_status") if entry.get("client_outcome") == "response" else None
    return Exchange(
        destination=str(entry.get("destination")), method=str(entry.get("method")), path=str(entry.get("path")),
        query=entry.get("query") or "", headers=dict(entry.get("headers") or {}),
        started=started if isinstance(started, (int, float)) else None,
        seconds=done - started if isinstance(done, (int, float)) and isinstance(started, (int, float)) else None,
        status=status if isinstance(status, int) else None,
        error=None if status is not None else str(entry.get("client_outcome")),
        upstream_status=entry.get("upstream_status"), fault=entry.get("fault"), rule_id=entry.get("rule_id"),
        line=entry.get("_line"))
