"""The fault proxy's process: ``python -m harness.proxy.process --commands FD --replies FD ...``.

Started by ``harness.proxy.host.ProxyHost`` under the interpreter ``harness.proxy.runtime`` chose. It
runs one ``ProxyServer`` and answers one JSON line per command line (see ``harness.proxy.host``),
reading them on the proxy's own event loop (no thread hop per command). End of file on the command
pipe (the harness stopped, or was killed) stops the proxy and removes ``--folder`` (the harness's
link to its own package), so nothing outlives the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any


async def handle(server: Any, message: dict[str, Any]) -> dict[str, Any]:
    """One command's reply; a failed command is an answer (``ok: false``), not a dead proxy."""
    from harness.proxy.rules import FaultRule

    op = message.get("op")
    try:
        if op == "ping":
            reply: dict[str, Any] = {}
        elif op == "configure":
            routes = await server.configure_async(
                message["routes"], [FaultRule.model_validate(r) for r in message["rules"]], message["journal"],
                secrets=message["secrets"], mode=message["mode"], seed=message["seed"],
                har_path=message.get("har"), flows_path=message.get("flows"), gate=message.get("gate"),
                seal=(bytes.fromhex(message["seal_key"]), message["seal_kind"]) if message.get("seal_key") else None)
            reply = {"routes": routes.to_dict()}
        elif op in ("finish", "stop"):
            reply = {"in_flight": await server.finish_async(message["timeout"]), "journal_seal": server.journal_seal}
        else:
            raise ValueError(f"unknown command {op!r}")
    except Exception as exc:
        return {"ok": False, "kind": type(exc).__name__, "error": str(exc) or repr(exc)}
    return {**reply, "ok": True}


async def serve(server: Any, commands: int, replies: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                                os.fdopen(commands, "rb", buffering=0))
    try:
        with os.fdopen(replies, "wb", buffering=0) as out:
            while line := await reader.readline():
                message = json.loads(line)
                out.write(json.dumps(await handle(server, message)).encode() + b"\n")
                if message.get("op") == "stop":
                    return
    finally:
        transport.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.proxy.process")
    parser.add_argument("--commands", type=int, required=True, help="fd to read commands from")
    parser.add_argument("--replies", type=int, required=True, help="fd to write replies to")
    parser.add_argument("--confdir", type=Path, required=True, help="mitmproxy's confdir (its CA)")
    parser.add_argument("--listen-host", default="127.0.0.1")
    parser.add_argument("--folder", type=Path, help="removed when the proxy stops")
    args = parser.parse_args(argv)
    from harness.proxy.server import ProxyServer

    server = ProxyServer(confdir=args.confdir, listen_host=args.listen_host)
    try:
        server.start()
        server.call(serve(server, args.commands, args.replies), timeout=None)
    except BrokenPipeError:  # the harness went away while we answered
        pass
    finally:
        server.stop(timeout=5.0)
        if args.folder is not None:
            shutil.rmtree(args.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
