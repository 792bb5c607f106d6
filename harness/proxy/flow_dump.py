"""``python -m harness.proxy.flow_dump FILE``: a mitmproxy flow dump as JSON, for ``harness.incident.flows``.

Runs under the fault proxy's interpreter (``harness.proxy.runtime``: the one that has mitmproxy 11), since
the harness itself never imports mitmproxy. Reads FILE with mitmproxy's own ``io.FlowReader`` (any dump
``mitmdump -w`` / mitmweb / the harness's ``traffic.mitm`` wrote, older flow versions migrated by it) and
prints one JSON object::

    {"flows": [{"method", "scheme", "host", "port", "path", "headers": [[name, value], ...], "body": BASE64,
                "started", "ended", "status", "reason", "response_headers", "response_body": BASE64,
                "error", "harness": {...} | null}, ...],
     "skipped": {"tcp": 1, ...}, "truncated": null | "what went wrong after the last whole flow"}

``status`` is null when the client got no answer: the flow has an error (killed, the server closed or
reset, a timeout) or no response. Bodies are decoded (gzip, brotli, ... where mitmproxy can).
Exit 2 with one line on stderr when FILE is not a flow dump (a HAR file, JSON, text, nothing readable).
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

BAD_INPUT = 2


def _b64(data: bytes | None) -> str:
    return base64.b64encode(data or b"").decode()


def flow_json(flow: Any) -> dict[str, Any]:
    """One HTTP flow as the client saw it."""
    req, resp, error = flow.request, flow.response, flow.error
    got_answer = resp is not None and error is None
    ended = None
    if error is not None:
        ended = error.timestamp
    elif resp is not None:
        ended = resp.timestamp_end or resp.timestamp_start
    harness = flow.metadata.get("harness")
    return {
        "method": req.method, "scheme": req.scheme, "host": req.host, "port": req.port, "path": req.path,
        "headers": [[k, v] for k, v in req.headers.items(multi=True)],
        "body": _b64(req.get_content(strict=False)),
        "started": req.timestamp_start, "ended": ended,
        "status": resp.status_code if got_answer else None,
        "reason": resp.reason if got_answer else None,
        "response_headers": [[k, v] for k, v in resp.headers.items(multi=True)] if got_answer else [],
        "response_body": _b64(resp.get_content(strict=False)) if got_answer else "",
        "error": error.msg if error is not None else (None if resp is not None else "no response"),
        "harness": harness if isinstance(harness, dict) else None,
    }


def dump(path: str) -> dict[str, Any]:
    """The JSON of a flow file; ValueError (the message for stderr) when it is not one."""
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    try:
        fo = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    flows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    truncated = None
    with fo:
        head = fo.read(4)
        fo.seek(0)
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"[")):
            # mitmproxy's reader would take a HAR file too; this reader is for flow dumps only
            raise ValueError(f"{path}: JSON (a HAR file?), not a mitmproxy flow dump (expected what `mitmdump -w` "
                             f"writes: tnetstring-encoded flows)")
        try:
            for flow in io.FlowReader(fo).stream():
                if isinstance(flow, http.HTTPFlow):
                    flows.append(flow_json(flow))
                else:
                    skipped[flow.type] = skipped.get(flow.type, 0) + 1
        except FlowReadException as exc:
            if not flows and not skipped:
                raise ValueError(f"{path}: not a mitmproxy flow dump ({exc}); expected what `mitmdump -w` writes: "
                                 f"tnetstring-encoded flows") from None
            truncated = f"unreadable after flow {len(flows) + sum(skipped.values())}: {exc}"
    return {"flows": flows, "skipped": skipped, "truncated": truncated}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.proxy.flow_dump FILE", file=sys.stderr)
        return BAD_INPUT
    try:
        out = dump(args[0])
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return BAD_INPUT
    json.dump(out, sys.stdout)  # ASCII: header bytes mitmproxy kept as surrogates survive the pipe
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
