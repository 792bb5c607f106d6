// What every Node connector shares with the harness (_harness.py's twin), and nothing else: the intents to carry
// out, each destination's base URL (through the fault proxy), and the contract's rule that a connector reports
// each outcome, SDK errors included, and exits 0 once it is done. No audit log: the harness judges these
// connectors in black-box mode, from the wire and the destinations' ledger alone.
const { readFileSync } = require("node:fs");

// seconds: the one setting every connector changes from its SDK's default (10 minutes for openai-node), so that
// the timeout scenario (an answer held 2 s) is a timeout for every SDK
const TIMEOUT = 1.0;

/** HARNESS_DESTINATION_<NAME>: every character outside A-Z, a-z, 0-9 becomes _, letters upper case. */
function baseUrl(destination) {
  return process.env["HARNESS_DESTINATION_" + destination.replace(/[^A-Za-z0-9]/g, "_").toUpperCase()];
}

/** HARNESS_MCP_SERVER_<NAME>: the command (shell words) that starts an MCP destination's server over stdio, as a
 * host configuration's command and args: the shell reads the words and execs the server in its own place. */
function serverCommand(destination) {
  const words = process.env["HARNESS_MCP_SERVER_" + destination.replace(/[^A-Za-z0-9]/g, "_").toUpperCase()];
  return { command: "/bin/sh", args: ["-c", `exec ${words}`] };
}

/** What a connector throws when it knows it cannot tell whether the write took effect (a 5xx after a keyed write,
 * an answer lost): its caller is told `unknown`, not `error`. _harness.py's OutcomeUnknown. */
class OutcomeUnknown extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "OutcomeUnknown";
  }
}

/** The names an error goes by: its own and its classes' (openai-node's APIConnectionTimeoutError is an
 * APIConnectionError). */
function namesOf(error) {
  const names = [error.name];
  for (let proto = Object.getPrototypeOf(error); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    names.push(proto.constructor?.name);
  }
  return names.filter((name) => typeof name === "string");
}

// what Node's fetch (undici) and its sockets say when the connection broke after the request left: no answer came
const CONNECTION_LOST = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);

/** The outcome an SDK's error tells its caller, read from the error and what it wraps (`cause`, the AI SDK's
 * `lastError`): `timeout` when it gave up waiting, `unknown` when no answer came (a connection error) or the
 * connector said so (OutcomeUnknown), else `error` (an answer said the write failed). By name, as _harness.py's
 * told(), so one rule reads every SDK's own errors. */
function told(error) {
  const seen = new Set();
  for (let e = error; e && typeof e === "object" && !seen.has(e); e = e.cause ?? e.lastError) {
    seen.add(e);
    const names = namesOf(e);
    if (e instanceof OutcomeUnknown) return "unknown";
    if (names.some((name) => name.includes("Timeout"))) return "timeout";
    if (names.some((name) => name.includes("Connection")) || CONNECTION_LOST.has(e.code)) return "unknown";
  }
  return "error";
}

/** What the connector tells its caller, as the harness reads it (docs/contract.md, "What the program told its
 * caller"): success with the resource's id, error, timeout or unknown. */
function report(intentId, outcome, effectRef) {
  const line = { intent_id: intentId, outcome, ...(effectRef ? { effect_ref: effectRef } : {}) };
  console.log("harness-report: " + JSON.stringify(line));
}

/** `perform(intent)` for each intent; print what it returned or the error it threw, and report it to the harness
 * as what the caller was told (a result is the resource's id: success; an error: `told(error)`). */
async function carryOut(perform) {
  const { intents } = JSON.parse(readFileSync(process.env.HARNESS_INTENTS, "utf8"));
  for (const intent of intents) {
    try {
      const result = await perform(intent);
      console.log(`${intent.intent_id}: -> ${result}`);
      report(intent.intent_id, "success", String(result));
    } catch (error) {  // whatever the SDK threw is this intent's outcome
      console.log(`${intent.intent_id}: ${error?.constructor?.name}: ${error?.message}`);
      report(intent.intent_id, told(error));
    }
  }
}

/** `call(server, tool, arguments)` once per intent (its kind is the tool), reported. _harness.py's run_tools. */
function runTools(call) {
  return carryOut((intent) => call(serverCommand(intent.destination), intent.kind, { ...intent.params }));
}

/** `call(baseUrl, params)` once per intent, reported. _harness.py's run. */
function run(call) {
  return carryOut((intent) => call(baseUrl(intent.destination), { ...intent.params }));
}

const sleep = (seconds) => new Promise((done) => setTimeout(done, seconds * 1000));

/** fetch with TIMEOUT on each request: for an SDK whose own timeout, if any, spans its retries (the AI SDK's). */
function fetchWithTimeout(url, init = {}) {
  const signals = [init.signal, AbortSignal.timeout(TIMEOUT * 1000)].filter(Boolean);
  return fetch(url, { ...init, signal: AbortSignal.any(signals) });
}

module.exports = { OutcomeUnknown, TIMEOUT, baseUrl, fetchWithTimeout, report, run, runTools, serverCommand, sleep, told };
