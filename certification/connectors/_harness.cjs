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

/** What the connector tells its caller, as the harness reads it (docs/contract.md, "What the program told its
 * caller"): success with the resource's id, error, or timeout. */
function report(intentId, outcome, effectRef) {
  const line = { intent_id: intentId, outcome, ...(effectRef ? { effect_ref: effectRef } : {}) };
  console.log("harness-report: " + JSON.stringify(line));
}

/** `perform(intent)` for each intent, and print what it returned or the error it threw; with `reports`, report it
 * too (a result is the resource's id: success; an error named TimeoutError, as the web platform names a timed-out
 * fetch: timeout; anything else: error). */
async function carryOut(perform, reports) {
  const { intents } = JSON.parse(readFileSync(process.env.HARNESS_INTENTS, "utf8"));
  for (const intent of intents) {
    try {
      const result = await perform(intent);
      console.log(`${intent.intent_id}: -> ${result}`);
      if (reports) report(intent.intent_id, "success", String(result));
    } catch (error) {  // whatever the SDK threw is this intent's outcome
      console.log(`${intent.intent_id}: ${error?.constructor?.name}: ${error?.message}`);
      if (reports) report(intent.intent_id, error?.name === "TimeoutError" ? "timeout" : "error");
    }
  }
}

/** `call(server, tool, arguments)` once per intent (its kind is the tool), reported. _harness.py's run_tools. */
function runTools(call) {
  return carryOut((intent) => call(serverCommand(intent.destination), intent.kind, { ...intent.params }), true);
}

/** `call(baseUrl, params)` once per intent; with `report: true`, each outcome reported as well. */
function run(call, { report = false } = {}) {
  return carryOut((intent) => call(baseUrl(intent.destination), { ...intent.params }), report);
}

const sleep = (seconds) => new Promise((done) => setTimeout(done, seconds * 1000));

/** fetch with TIMEOUT on each request: for an SDK whose own timeout, if any, spans its retries (the AI SDK's). */
function fetchWithTimeout(url, init = {}) {
  const signals = [init.signal, AbortSignal.timeout(TIMEOUT * 1000)].filter(Boolean);
  return fetch(url, { ...init, signal: AbortSignal.any(signals) });
}

module.exports = { TIMEOUT, baseUrl, fetchWithTimeout, report, run, runTools, serverCommand, sleep };
