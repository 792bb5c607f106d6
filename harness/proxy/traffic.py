"""The run's traffic files, written by the fault proxy as each flow's fate is sealed (its journal line).

- ``traffic.mitm``: mitmproxy's own flow format (``mitmproxy.io.FlowWriter``), one flow appended and
  flushed per journal line, so a killed run keeps every flow it had; ``mitmweb -r`` / ``mitmdump -r``
  open it. Each flow's ``metadata["harness"]`` holds the journal's facts (``flow_id``, ``seq``,
  ``rule_id``, ``fault``, ``client_outcome``, ``client_status``, ``upstream_status``, ``destination``,
  ``forward_count``). A flow whose client got no (whole) answer carries ``flow.error`` saying what the
  client saw (the browsers' words: ``net::ERR_EMPTY_RESPONSE``, ...) and keeps the destination's answer,
  when there was one, as its response: what the client lost.
- ``traffic.har``: HAR 1.2 from mitmproxy's own exporter (``mitmproxy.addons.savehar``), the client's
  view: an answer the client never got is ``response.status: 0`` with ``_error``; a body it got cut off
  keeps its status and has ``_error``; each entry has ``_harness`` (the facts above). Rewritten in place
  per flow (one ``pwrite`` of the new entry and the closing brackets), so the file is valid JSON after
  every flow.

Both hold the client's request as it sent it (without the harness's ``X-Harness-Flow``) and the bodies,
with secrets redacted exactly as the journal redacts them (``harness.journal.redact_headers``: the
Authorization, Cookie, Proxy-Authorization and Set-Cookie values, and any run secret in any header), and
every run secret also replaced in paths and bodies.

Runs in the proxy's own process (it imports mitmproxy); the harness never imports it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mitmproxy import http, io, version
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.connection import Server
from mitmproxy.flow import Error

from harness.contract import FLOW_HEADER, GATE_HEADER
from harness.journal import IN_FLIGHT_AT_END, redact_headers, redaction
from harness.safe_files import create_new, create_new_fd

# what the client saw instead of an answer, in the words browsers' devtools write in a HAR's ``_error``
OUTCOME_ERRORS = {
    "connection_closed": "net::ERR_EMPTY_RESPONSE",
    "connection_reset": "net::ERR_CONNECTION_RESET",
    "timeout": "net::ERR_TIMED_OUT",
    IN_FLIGHT_AT_END: "net::ERR_ABORTED",
}
FAULT_ERRORS = {  # a closed connection after a status line: the body was broken, not missing
    "truncate_body": "net::ERR_CONTENT_LENGTH_MISMATCH",
    "malformed_chunk": "net::ERR_INVALID_CHUNKED_ENCODING",
}
log = logging.getLogger(__name__)
FACTS = ("flow_id", "seq", "rule_id", "fault", "client_outcome", "client_status", "upstream_status", "destination",
         "forward_count")


def client_error(outcome: str, fault: str | None) -> str | None:
    """The error the client saw for a journal outcome (None: it got an answer)."""
    if outcome == "response":
        return None
    if outcome == "connection_closed" and fault in FAULT_ERRORS:
        return FAULT_ERRORS[fault]
    return OUTCOME_ERRORS.get(outcome, "net::ERR_FAILED")


class HarWriter:
    """A HAR 1.2 file kept valid after every entry: each add writes the entry and the closing brackets
    over the previous closing brackets, in one ``pwrite``."""

    CLOSE = b"\n]}}\n"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        head = json.dumps({"version": "1.2", "creator": {"name": "retry-harness (mitmproxy savehar)",
                                                          "version": version.VERSION, "comment": ""},
                           "pages": []})
        opening = ('{"log": ' + head[:-1] + ', "entries": [').encode()
        # a file the proxy creates (harness.safe_files): whatever the agent left at the name is replaced, not opened
        self._fd: int | None = create_new_fd(self.path, append=False)  # written at offsets: no O_APPEND
        os.write(self._fd, opening + self.CLOSE)
        self._end = len(opening)  # where the closing brackets start
        self.count = 0

    def add(self, entry: Mapping[str, Any]) -> None:
        if self._fd is None:
            raise ValueError(f"HAR file {self.path} is closed")
        data = (b",\n" if self.count else b"\n") + json.dumps(entry, ensure_ascii=False).encode()
        os.pwrite(self._fd, data + self.CLOSE, self._end)  # longer than what it overwrites: no truncation
        self._end += len(data)
        self.count += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class TrafficWriter:
    """Both traffic files of one scenario run; ``add`` is called once per journal line."""

    def __init__(self, har_path: str | os.PathLike[str] | None, flows_path: str | os.PathLike[str] | None,
                 secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self._secret_bytes = tuple((s.encode(), redaction(s).encode()) for s in self.secrets)
        self._har = HarWriter(har_path) if har_path else None
        self._flows_file = None
        if flows_path:
            Path(flows_path).parent.mkdir(parents=True, exist_ok=True)
            self._flows_file = create_new(flows_path)  # kept open for the scenario, closed by close()
        self._flows = io.FlowWriter(self._flows_file) if self._flows_file else None
        self._exporter = SaveHar()
        self._servers_seen: set[Server] = set()
        self._pending: list[tuple[http.HTTPFlow, Mapping[str, Any], str | None]] = []
        self._scheduled = False

    @property
    def closed(self) -> bool:
        return self._har is None and self._flows_file is None

    def add(self, flow: http.HTTPFlow, record: Mapping[str, Any], upstream_error: str | None = None) -> None:
        """Write one flow whose journal line is ``record`` (the facts), as the client saw it.

        On the proxy's event loop the writing (about 0.5 ms a flow: a copy, two encodings) is deferred to the
        loop's next turn, so it is not on the path of the answer the hook is about to send: the flow is
        sealed (its journal line is written) and nothing the files hold changes after that. ``close``
        writes whatever is still pending."""
        if self.closed:
            return
        self._pending.append((flow, record, upstream_error))
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (a test, a tool): now
            self.drain()
            return
        self._scheduled = True
        loop.call_soon(self.drain)

    def drain(self) -> None:
        """Write the flows added since the last drain."""
        self._scheduled = False
        pending, self._pending = self._pending, []
        for flow, record, upstream_error in pending:
            try:
                self._write(flow, record, upstream_error)
            except Exception:  # a flow the files cannot hold must not cost the others, nor the run
                log.exception("traffic files: flow %s not saved", record.get("flow_id"))

    def _write(self, flow: http.HTTPFlow, record: Mapping[str, Any], upstream_error: str | None) -> None:
        copy = self._client_copy(flow, record, upstream_error)
        if self._har is not None:
            self._har.add(self._har_entry(copy, record))
        if self._flows is not None and self._flows_file is not None:  # last: a flow in it is in the HAR too
            self._flows.add(copy)
            self._flows_file.flush()

    def close(self) -> None:
        self.drain()
        if self._har is not None:
            self._har.close()
            self._har = None
        if self._flows_file is not None:
            self._flows_file.close()
            self._flows_file = None
            self._flows = None

    # -- the client's view, redacted ------------------------------------------------------------

    def _client_copy(self, flow: http.HTTPFlow, record: Mapping[str, Any], upstream_error: str | None) \
            -> http.HTTPFlow:
        live_metadata = flow.metadata
        flow.metadata = {}  # the live metadata holds the scenario's state: not to be copied
        try:
            copy: http.HTTPFlow = flow.copy()
        finally:
            flow.metadata = live_metadata
        facts = {k: record.get(k) for k in FACTS}
        if upstream_error:
            facts["upstream_error"] = upstream_error
        copy.metadata = {"harness": facts}
        copy.request.headers.pop(FLOW_HEADER, None)
        copy.request.headers.pop(GATE_HEADER, None)  # the run's secret: these files are written while the agent runs
        outcome = str(record.get("client_outcome"))
        error = client_error(outcome, record.get("fault"))
        if error is None:
            copy.error = None
            status = record.get("client_status")
            if copy.response is None and status is not None:  # mitmproxy answered itself (destination down: 502)
                copy.response = _proxy_error_response(int(status), upstream_error or "")
        else:
            copy.error = Error(error)
        self._redact(copy)
        return copy

    def _redact(self, flow: http.HTTPFlow) -> None:
        if self.secrets:
            path = flow.request.path
            for secret in self.secrets:
                path = path.replace(secret, redaction(secret))
            flow.request.path = path
        for message in (flow.request, flow.response):
            if message is None:
                continue
            fields = []
            changed = False
            for name, value in message.headers.items(multi=True):
                clean = redact_headers([(name, value)], self.secrets)[name.lower()]
                changed = changed or clean != value
                fields.append((name.encode("utf-8", "surrogateescape"), clean.encode("utf-8", "surrogateescape")))
            if changed:
                message.headers = http.Headers(fields)
            self._redact_body(message)

    def _redact_body(self, message: http.Message) -> None:
        raw = message.raw_content
        if not raw or not self._secret_bytes:
            return
        content = message.get_content(strict=False) or b""  # decoded (gzip, ...) where it can be
        clean = content
        for secret, stand_in in self._secret_bytes:
            clean = clean.replace(secret, stand_in)
        if clean == content:
            return
        if content == raw:
            message.raw_content = clean
        else:
            message.headers.pop("content-encoding", None)  # kept decoded: the secret may not survive in it
            message.raw_content = clean

    def _har_entry(self, flow: http.HTTPFlow, record: Mapping[str, Any]) -> dict[str, Any]:
        kept = flow.response
        if record.get("client_status") is None:  # the client got no answer: status 0 and _error
            flow.response = None
        try:
            entry: dict[str, Any] = self._exporter.flow_entry(flow, self._servers_seen)
        finally:
            flow.response = kept
        if flow.error is not None and "_error" not in entry["response"]:
            entry["response"]["_error"] = flow.error.msg  # an answer the client got cut off
        if "postData" not in entry["request"] and flow.request.raw_content:  # savehar: POST, PUT, PATCH only
            entry["request"]["postData"] = {"mimeType": flow.request.headers.get("content-type", ""),
                                            "text": flow.request.get_text(strict=False), "params": []}
        ts_request, ts_done = record.get("ts_request"), record.get("ts_done")
        if isinstance(ts_request, int | float) and isinstance(ts_done, int | float):
            elapsed = max(0.0, (ts_done - ts_request) * 1000)  # how long the client waited
            timings = entry["timings"]
            known = sum(v for k, v in timings.items() if k != "wait" and isinstance(v, int | float) and v >= 0)
            timings["wait"] = max(0.0, elapsed - known)
            entry["time"] = known + timings["wait"]
        entry["_harness"] = dict(flow.metadata["harness"])
        return entry


def _proxy_error_response(status: int, message: str) -> http.Response:
    """The answer mitmproxy itself sends the client when the destination fails (as its http layer does)."""
    try:
        from mitmproxy.proxy.layers.http._base import format_error

        body = format_error(status, message)
    except ImportError:  # a private helper: its absence costs the page, not the status
        body = message.encode()
    return http.Response.make(status, body, {"Server": version.MITMPROXY, "Connection": "close",
                                             "Content-Type": "text/html"})
