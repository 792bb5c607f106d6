// The MCP TypeScript SDK's stdio client (@modelcontextprotocol/sdk), defaults: the server's command started as a
// subprocess (StdioClientTransport), one Client, one callTool; the SDK retries nothing, and a call sends no key
// argument unless the caller puts one. The Python mcp_stdio_default's twin.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ErrorCode, McpError } = require("@modelcontextprotocol/sdk/types.js");
const { TIMEOUT, runTools } = require("./_harness.cjs");

async function callTool(server, tool, args) {
  const client = new Client({ name: "mcp-node-default", version: "1.0.0" });
  await client.connect(new StdioClientTransport(server));
  try {
    const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: TIMEOUT * 1000 });
    if (result.isError) throw new Error(result.content[0].text);
    return result.structuredContent.id;
  } catch (error) {  // the SDK's request timeout is an McpError: said as a timeout to the caller
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) error.name = "TimeoutError";
    throw error;
  } finally {
    await client.close();
  }
}

runTools(callTool);
