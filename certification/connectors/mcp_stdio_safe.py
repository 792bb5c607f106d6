"""The mcp SDK's stdio client, made safe by its caller: the operation's key argument (idempotency_key, from the
intent) on every call, and up to 3 calls, each in a new session (a server that died is started again): after a
lost or late result, after an error result, and after a rate_limited one once its "retry after N s" is waited out.
The same key on every call: the tool replays the first result instead of committing again."""

import asyncio
import re
import time
from datetime import timedelta
from importlib.metadata import version

from _harness import TIMEOUT, run_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SECONDS = TIMEOUT if int(version("mcp").split(".")[0]) >= 2 else timedelta(seconds=TIMEOUT)  # 2.x: a float
CALLS = 3


async def call_tool(server, tool, arguments):
    async with stdio_client(StdioServerParameters(command=server[0], args=server[1:])) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            try:
                result = await session.call_tool(tool, arguments, read_timeout_seconds=SECONDS)
            except Exception as exc:  # the SDK's request timeout is an McpError: said as a timeout to the caller
                if "timed out" in str(exc).lower():
                    raise TimeoutError(str(exc)) from exc
                raise
    wire = result.model_dump(by_alias=True, mode="json")  # isError, structuredContent on 1.x and 2.x alike
    if wire.get("isError"):
        raise RuntimeError(wire["content"][0]["text"])
    return wire["structuredContent"]["id"]


def create(server, tool, arguments):
    arguments = {**arguments, "idempotency_key": f"order-key-{arguments['client_reference']}"}
    for call in range(1, CALLS + 1):
        try:
            return asyncio.run(call_tool(server, tool, arguments))
        except Exception as exc:  # noqa: BLE001 - the key makes any failure safe to retry
            if call == CALLS:
                raise
            wait = re.search(r"retry after (\d+(?:\.\d+)?) s", str(exc))
            time.sleep(float(wait.group(1)) if wait else 0.2)
    raise AssertionError("unreachable")


run_tools(create)
