"""A mitmproxy flow dump (``mitmdump -w``, mitmweb's save, the harness's own ``traffic.mitm``) read into the
incident model.

The harness never imports mitmproxy (it pins ``h11<=0.14``), so the file is read by mitmproxy's own
``io.FlowReader`` in the fault proxy's interpreter (``harness.proxy.runtime``), by
``python -m harness.proxy.flow_dump FILE``, which prints the flows as JSON; this module turns that into
``Exchange`` objects. A flow with an error (killed, the server closed or reset the connection, a timeout)
or without a response is ``status`` None with the error's text; HTTP/2 pseudo-headers are left out,
header names lower-cased; bodies are decoded (gzip, ...). A flow of the harness's own carries
``metadata["harness"]``: its ``destination`` (the scenario's name, else the request's host:port),
``upstream_status`` and ``fault`` are kept. Non-HTTP flows (TCP, UDP, DNS) are left out and said in
``Incident.notes``; a dump cut off mid-flow (a killed ``mitmdump``) keeps its whole flows, with a note.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from harness.incident.har import header_dict
from harness.incident.model import Exchange, Incident, IncidentError

EXPECTED = "expected a mitmproxy flow dump (what `mitmdump -w FILE` writes)"
DUMP_MODULE = "harness.proxy.flow_dump"
DUMP_TIMEOUT = 300.0


def dump_flows(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``python -m harness.proxy.flow_dump FILE``'s JSON; IncidentError naming the file when it is not a dump."""
    from harness.proxy.runtime import RuntimeError_, run_module

    file = Path(path)
    if not file.is_file():
        raise IncidentError(f"{path}: {'a folder' if file.is_dir() else 'no such file'}; {EXPECTED}")
    try:
        done = run_module(DUMP_MODULE, [str(file.resolve())], timeout=DUMP_TIMEOUT)
    except RuntimeError_ as exc:
        raise IncidentError(f"{path}: cannot read a flow dump without mitmproxy 11: {exc}") from None
    except OSError as exc:
        raise IncidentError(f"{path}: cannot start mitmproxy's reader: {exc}") from None
    stderr = done.stderr.decode(errors="replace").strip()
    if done.returncode != 0:
        said = stderr.splitlines()[-1] if stderr else f"exit {done.returncode}"
        raise IncidentError(said if said.startswith(str(file.resolve())) or said.startswith(str(path))
                            else f"{path}: {said}; {EXPECTED}")
    try:
        out: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise IncidentError(f"{path}: mitmproxy's reader printed no JSON ({stderr[-300:]})") from None
    return out


def read_flows(path: str | os.PathLike[str]) -> Incident:
    """The incident a flow dump shows: one ``Exchange`` per HTTP flow, in time order."""
    dumped = dump_flows(path)
    notes: list[str] = []
    for kind, count in sorted(dumped.get("skipped", {}).items()):
        notes.append(f"{count} {kind} flow{'' if count == 1 else 's'} left out (not HTTP)")
    if dumped.get("truncated"):
        notes.append(f"the flow dump is cut off: {dumped['truncated']}")
    exchanges = [_exchange(flow, number) for number, flow in enumerate(dumped.get("flows", []), 1)]
    if not exchanges:
        said = f" ({'; '.join(notes)})" if notes else ""
        raise IncidentError(f"{path}: a flow dump with no HTTP requests{said}; expected at least one HTTP flow")
    exchanges.sort(key=lambda e: e.started or 0.0)
    return Incident(source=str(path), format="flows", exchanges=exchanges, notes=notes)


def _exchange(flow: dict[str, Any], number: int) -> Exchange:
    harness = flow.get("harness") or {}
    path, _, query = str(flow["path"]).partition("?")
    host = str(flow["host"])
    if ":" in host:
        host = f"[{host}]"
    started, ended = flow.get("started"), flow.get("ended")
    upstream = harness.get("upstream_status")
    return Exchange(
        destination=str(harness.get("destination") or f"{host}:{flow['port']}"),
        method=str(flow["method"]).upper(),
        path=path or "/",
        query=query,
        headers=header_dict((k, v) for k, v in flow.get("headers", [])),
        body=base64.b64decode(flow.get("body") or ""),
        started=started,
        seconds=max(0.0, ended - started) if isinstance(started, int | float) and isinstance(ended, int | float)
        else None,
        status=flow.get("status"),
        response_headers=header_dict((k, v) for k, v in flow.get("response_headers", [])),
        response_body=base64.b64decode(flow.get("response_body") or ""),
        error=flow.get("error"),
        upstream_status=upstream if isinstance(upstream, int) else None,
        fault=str(harness["fault"]) if harness.get("fault") else None,
        line=number,
    )
