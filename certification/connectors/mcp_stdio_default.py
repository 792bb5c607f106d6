"""The mcp SDK's stdio client, defaults: the server's command started as a subprocess (StdioServerParameters),
one ClientSession, one call_tool; the SDK retries nothing, and a call sends no key argument unless the caller
puts one."""

import asyncio
from datetime import timedelta
from importlib.metadata import version

from _harness import TIMEOUT, run_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SECONDS = TIMEOUT if int(version("mcp").split(".")[0]) >= 2 else timedelta(seconds=TIMEOUT)  # 2.x: a float


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
    return asyncio.run(call_tool(server, tool, arguments))


run_tools(create)
