"""An MCP tool server over stdio, as hosts start one (a command and its arguments): a relay that reads the
client's JSON-RPC messages on stdin (the `mcp` package's ``stdio_server`` frames and validates them) and posts
each to the destination's MCP endpoint through the fault proxy, one message a request, as the Streamable HTTP
client does; the answer goes back on stdout.

So the tools, their annotations, the effect ledger and the declared failures stay the HTTP destination's
(``fake_destinations.mcp``), the proxy injects the faults and journals every message as it journals HTTP, and
the relay, a process the agent starts, holds no evidence. What each fault looks like on the pipe:

- an answer (a result, an error result after the commit, a late result): written as it came, when it came;
- a 202 (the answer to a notification): nothing;
- an HTTP error without a JSON-RPC body (the proxy's 502 while the destination is down): a JSON-RPC error;
- no answer at all (the proxy dropped it after the commit, the destination was killed mid-call): the server
  dies, as a server that crashes mid-call does (a pipe loses no line otherwise): exit status 1 with nothing
  written, its stdout closed. The destination's state (ledger, keys, resources) outlives it: the next start of
  the same command is the server restarted.

Run as a file under ``python -I`` (``command``): isolated, so neither the agent's ``PYTHONPATH`` nor this folder
(whose ``mcp.py`` would shadow the package) is on its path, and an MCP client's filtered environment is enough.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

EXIT_LOST = 1  # the status of a server that died mid-call
POST_TIMEOUT_SECONDS = 120.0  # beyond any hold the proxy declares (hold_ms), and bounded
_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def command(endpoint_url: str, *, proxy: str | None = None, python: str | None = None) -> list[str]:
    """The command that starts this server for the MCP endpoint at ``endpoint_url`` (through the fault proxy:
    its reverse route, or ``proxy`` in regular mode). Standard library only: the engine calls it."""
    words = [python or sys.executable, "-I", str(Path(__file__).resolve()), endpoint_url]
    return [*words, "--proxy", proxy] if proxy else words


class AnswerLost(Exception):
    """The request was sent and no HTTP answer came back (the connection closed, reset or timed out)."""


def post(url: str, body: bytes, opener: urllib.request.OpenerDirector) -> tuple[int, bytes]:
    """One JSON-RPC message posted: (status, body); ``AnswerLost`` when no answer came."""
    request = urllib.request.Request(url, data=body, headers=_HEADERS, method="POST")
    try:
        with opener.open(request, timeout=POST_TIMEOUT_SECONDS) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:  # an answer all the same
        with error:
            return error.code, error.read()
    except (OSError, urllib.error.URLError) as error:  # http.client's RemoteDisconnected is an OSError too
        raise AnswerLost(str(error)) from None


def answers(status: int, body: bytes, request_id: Any) -> list[dict[str, Any]]:
    """What goes back on stdout for one HTTP answer: its JSON-RPC messages, else (a request's) one error."""
    if status == 202:
        return []
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    items = doc if isinstance(doc, list) else [doc]
    messages = [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]
    if messages or request_id is None:
        return messages
    return [{"jsonrpc": "2.0", "id": request_id,
             "error": {"code": -32603, "message": f"the tool server's backend answered HTTP {status}"}}]


async def relay(endpoint_url: str, proxy: str | None) -> None:
    import anyio
    import mcp.types as types
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({"http": proxy} if proxy else {})]
    opener = urllib.request.build_opener(*handlers)

    async def forward(message: Any, write: Any) -> None:
        doc = message.message.model_dump(by_alias=True, mode="json", exclude_none=True)
        body = json.dumps(doc).encode()
        try:
            status, answer = await anyio.to_thread.run_sync(post, endpoint_url, body, opener,
                                                             abandon_on_cancel=True)
        except AnswerLost as lost:
            print(f"mcp_stdio: no answer to {doc.get('method') or 'a message'} ({lost}): the server dies",
                  file=sys.stderr, flush=True)
            os._exit(EXIT_LOST)  # at once: nothing more is written, stdout closes with the process
        for out in answers(status, answer, doc.get("id")):
            await write.send(SessionMessage(types.JSONRPCMessage.model_validate(out)))

    async with stdio_server() as (read, write):
        async with write, anyio.create_task_group() as group:
            async for message in read:
                if isinstance(message, Exception):  # a line that is no JSON-RPC message: said, not forwarded
                    print(f"mcp_stdio: not a JSON-RPC message: {message}", file=sys.stderr, flush=True)
                    continue
                group.start_soon(forward, message, write)  # one task a message: a held answer blocks no other
            group.cancel_scope.cancel()  # stdin closed: the client is gone, nothing waits for an answer


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="An MCP tool server over stdio (retry-harness's fake).")
    parser.add_argument("endpoint_url", help="the destination's MCP endpoint, through the fault proxy")
    parser.add_argument("--proxy", help="the fault proxy in regular mode (http://host:port)")
    args = parser.parse_args(argv)
    import anyio

    anyio.run(relay, args.endpoint_url, args.proxy)
    os._exit(0)  # no thread still posting (an answer nobody awaits) keeps the process


if __name__ == "__main__":
    sys.exit(main())
