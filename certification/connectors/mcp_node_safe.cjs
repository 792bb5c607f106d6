// The MCP TypeScript SDK's stdio client, made safe by its caller: the operation's key argument (idempotency_key,
// from the intent) on every call, and up to 3 calls, each on a new Client (a server that died is started again).
// Before each call after the first, the lookup tool (find_orders by client_reference): an order the lost call
// made is the answer, with no second call; else the call again (after a rate_limited one, once its "retry after
// N s" is waited out), with the same key, so a tool that did commit replays its first result.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ErrorCode, McpError } = require("@modelcontextprotocol/sdk/types.js");
const { TIMEOUT, runTools, sleep } = require("./_harness.cjs");

const CALLS = 3;
const LOOKUP = "find_orders";

/** One session: `tool` called once with `args`; its structuredContent, or what the SDK or the tool said. */
async function callOnce(server, tool, args) {
  const client = new Client({ name: "mcp-node-safe", version: "1.0.0" });
  await client.connect(new StdioClientTransport(server));
  try {
    const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: TIMEOUT * 1000 });
    if (result.isError) throw new Error(result.content[0].text);
    return result.structuredContent;
  } catch (error) {  // the SDK's request timeout is an McpError: said as a timeout to the caller
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) error.name = "TimeoutError";
    throw error;
  } finally {
    await client.close();
  }
}

async function callTool(server, tool, args) {
  args = { ...args, idempotency_key: `order-key-${args.client_reference}` };
  for (let call = 1; ; call++) {
    try {
      return (await callOnce(server, tool, args)).id;
    } catch (error) {
      if (call === CALLS) throw error;
      const wait = /retry after (\d+(?:\.\d+)?) s/.exec(error.message);
      await sleep(wait ? Number(wait[1]) : 0.2);
    }
    try {  // did the call that failed commit after all? then that order is the answer
      const { items } = await callOnce(server, LOOKUP, { client_reference: args.client_reference });
      if (items.length) return items[0].id;
    } catch {}  // no answer from the lookup: the key keeps the next call safe
  }
}

runTools(callTool);
