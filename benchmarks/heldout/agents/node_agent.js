// Held-out correct agent in Node 20, no packages (global fetch, node:crypto, node:fs).
// kind: correct
// transport: http
//
// Written from docs/contract.md alone. After a doubt it looks the effect up first (contract section 8: "before
// anything else"), and retries on the key only once the lookup found nothing past the lag, or where there is
// no lookup. (Its first version retried on the key before looking: off section 8, see RESULTS.md.) State: one
// JSON file in the state dir, replaced atomically before every step.
"use strict";
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const env = process.env;
const DOC = JSON.parse(fs.readFileSync(env.HARNESS_INTENTS, "utf8"));
const STATE_FILE = path.join(env.HARNESS_STATE_DIR, "node-agent.json");
const STATE = fs.existsSync(STATE_FILE) ? JSON.parse(fs.readFileSync(STATE_FILE, "utf8")) : {};
const SESSION = "ses_" + crypto.randomBytes(6).toString("hex");
const BUDGET = 3;
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
const id = (p) => `${p}_${crypto.randomBytes(6).toString("hex")}`;
const suffix = (name) => name.replace(/[^A-Za-z0-9]/g, "_").toUpperCase();

function canonical(v) { // keys sorted, no whitespace, non-ASCII kept: the contract's fingerprint
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}
const fp = (v) => "sha256:" + crypto.createHash("sha256").update(canonical(v), "utf8").digest("hex");

function save() {
  fs.writeFileSync(STATE_FILE + ".tmp", JSON.stringify(STATE));
  fs.renameSync(STATE_FILE + ".tmp", STATE_FILE);
}

function log(event, opId, fields) {
  const line = { event, ts: Date.now() / 1000, session_id: SESSION, operation_id: opId };
  for (const [k, v] of Object.entries(fields)) if (v !== null && v !== undefined) line[k] = v;
  fs.appendFileSync(env.HARNESS_AUDIT_LOG, JSON.stringify(line) + "\n");
}

async function call(dest, method, url, body, headers) {
  const base = env["HARNESS_DESTINATION_" + suffix(dest)].replace(/\/$/, "");
  const all = { "content-type": "application/json", connection: "close", ...headers };
  const secret = env["HARNESS_SECRET_" + suffix(dest)];
  if (secret) all.authorization = "Bearer " + secret;
  let answer;
  try {
    answer = await fetch(url.startsWith("http") ? url : base + url, {
      method, headers: all, body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(1500),
    });
  } catch (err) {
    const code = (err.cause && err.cause.code) || "";
    if (code === "ECONNREFUSED") return { state: "not_sent", error: code };
    return { state: "sent_no_response", error: (code || err.name || "fetch failed").toString() };
  }
  let text;
  try { text = await answer.text(); } catch (err) { return { state: "sent_no_response", error: "body cut short" }; }
  let parsed = {};
  try { parsed = JSON.parse(text || "{}"); } catch (err) {
    if (answer.ok) return { state: "sent_no_response", error: "unreadable 2xx body" };
  }
  return { state: "response_received", status: answer.status, body: parsed, headers: answer.headers };
}

const contractOf = (op) => DOC.destinations[op.intent.destination];

async function lookup(op, source) {
  const spec = contractOf(op).lookup;
  const q = `${spec.path}?${encodeURIComponent(spec.query_param)}=${encodeURIComponent(op.operation_id)}`;
  const got = await call(op.intent.destination, spec.method, q);
  let found = null;
  let refs = [];
  if (got.state === "response_received" && got.status === 200 && Array.isArray(got.body[spec.result_field])) {
    refs = got.body[spec.result_field].map((item) => String(item[op.kind.effect_ref_field]));
    found = refs.length > 0;
  }
  const lagging = Date.now() / 1000 - op.last_sent < 1.5 * (spec.lag_seconds || 0);
  const obs = id("obs");
  log("observation", op.operation_id, { observation_id: obs, source, method: spec.method, path: spec.path, found,
    effect_refs: refs, lag_possible: found === false ? lagging : null });
  return { found, refs, obs, lagging };
}

function resolve(op, state, refs, evidence, reason, extra = {}) {
  op.resolved = true;
  save();
  log("resolution", op.operation_id, { state, effect_refs: refs, evidence, reason, ...extra });
}

function duplicate(op, refs, obs) {
  const fix = id("op");
  log("operation", fix, { intent: { kind: "compensate_duplicate", destination: op.intent.destination,
    params: { effect_refs: refs.slice(1) } }, correction_of_operation_id: op.operation_id, owner: "operator",
  state: "open" });
  resolve(op, "duplicate_effect_confirmed", refs, [obs], "two records for one intent",
    { correction_operation_id: fix });
}

// The effect may exist: true to retry (with `reason`), false once resolved.
async function doubt(op) {
  const c = contractOf(op);
  const retention = c.idempotency.retention_seconds;
  if (c.lookup) {
    for (let i = 0; i < 14; i++) {
      const seen = await lookup(op, "lookup");
      if (seen.found && seen.refs.length > 1) { duplicate(op, seen.refs, seen.obs); return false; }
      if (seen.found) { resolve(op, "succeeded", seen.refs, [seen.obs], "the lookup found it"); return false; }
      if (seen.found === false && !seen.lagging && i >= 1) return true;
      await sleep(seen.found === null ? 0.5 : 0.2);
    }
  }
  if (op.key && (retention === null || Date.now() / 1000 - op.opened < 0.9 * retention)) return true;
  resolve(op, "unknown", [], [...op.attempts], "no evidence either way: for an operator");
  return false;
}

async function send(op, reason) {
  const att = { id: id("att"), at: Date.now() / 1000,
    trace: `00-${crypto.randomBytes(16).toString("hex")}-${crypto.randomBytes(8).toString("hex")}-01` };
  op.pending = att;
  op.last_sent = att.at;
  save();
  const got = await call(op.intent.destination, op.kind.method, op.path, op.body, { ...op.headers, traceparent: att.trace });
  note(op, att, got, reason);
  return { att, got };
}

function note(op, att, got, reason) {
  const prev = op.attempts.length ? op.attempts[op.attempts.length - 1] : null;
  op.attempts.push(att.id);
  op.pending = null;
  save();
  const ok = got.status >= 200 && got.status < 300 && got.status !== 202;
  const ref = ok && got.body ? got.body[op.kind.effect_ref_field] : null;
  const retryAfter = got.status === 429 ? Number((got.headers && got.headers.get("retry-after")) || 1) : null;
  log("attempt", op.operation_id, { ts: att.at, attempt_id: att.id, attempt_number: op.attempts.length,
    destination: op.intent.destination, method: op.kind.method, path: op.path, idempotency_key: op.key,
    request_fingerprint: fp(op.body), dispatch_state: got.state, http_status: got.status, error: got.error,
    effect_refs: ref ? [String(ref)] : null, traceparent: att.trace, retry_after_seconds: retryAfter,
    attempt_budget_remaining: BUDGET - op.attempts.length,
    ...(prev ? { retry_of_attempt_id: prev, retry_reason: reason, prior_request_fingerprint: fp(op.body),
      retry_decision: `retry (${reason})` } : {}) });
}

async function poll(op, attId, body) {
  const url = body.operation.status_url;
  for (const wait of [0.2, 0.3, 0.5, 0.5, 1, 1, 2]) {
    await sleep(wait);
    const got = await call(op.intent.destination, "GET", url);
    const said = got.body && got.body.status;
    const refs = said === "succeeded" ? [String(got.body.effect_ref)] : [];
    const obs = id("obs");
    log("observation", op.operation_id, { observation_id: obs, source: "status_poll", method: "GET", path: url,
      found: said === "succeeded" ? true : said === "failed" ? false : null, effect_refs: refs });
    if (said === "succeeded" || said === "failed") return resolve(op, said, refs, [attId, obs], `reported ${said}`);
  }
  resolve(op, "unknown", [], [attId], "still pending: for an operator");
}

function open(intent) {
  const c = DOC.destinations[intent.destination];
  const kind = c.operations[intent.kind];
  const opId = id("op");
  const key = c.idempotency.style === "none" ? null
    : "idem_" + crypto.createHash("sha256").update(opId).digest("hex").slice(0, 24);
  const body = { ...(kind.body_defaults || {}), ...intent.params, [kind.client_reference_field]: opId };
  const headers = {};
  if (key && c.idempotency.body_field) body[c.idempotency.body_field] = key;
  else if (key) headers[c.idempotency.header] = key;
  const p = kind.path.replace(/\{(\w+)\}/g, (_, name) => String(intent.params[name]));
  const op = { operation_id: opId, intent, kind, key, body, headers, path: p, attempts: [], opened: Date.now() / 1000,
    last_sent: 0, resolved: false, pending: null };
  STATE[intent.intent_id] = op;
  save();
  const old = intent.supersedes ? STATE[intent.supersedes] : null;
  log("operation", opId, { intent_id: intent.intent_id, intent, idempotency_key: key, payload_fingerprint: fp(body),
    state: "open", owner: SESSION, supersedes_operation_id: old ? old.operation_id : null });
  return op;
}

async function carryOut(intent) {
  const op = STATE[intent.intent_id] || open(intent);
  if (op.resolved) return;
  let reason = null;
  if (op.pending) { // killed mid-attempt: it may have left
    note(op, op.pending, { state: "sent_no_response", error: "restarted mid-attempt" }, "response_lost_after_dispatch");
    reason = "response_lost_after_dispatch";
    if (!(await doubt(op))) return;
  }
  for (;;) {
    if (op.attempts.length >= BUDGET) return resolve(op, "unknown", [], [...op.attempts], "budget spent");
    const { att, got } = await send(op, reason);
    const c = contractOf(op);
    if (got.state === "not_sent") { reason = "connection_not_established"; continue; }
    if (got.state === "sent_no_response") { reason = "response_lost_after_dispatch"; if (await doubt(op)) continue; return; }
    if (got.status === 429) {
      await sleep(Math.min(Number(got.headers.get("retry-after") || 1), 5));
      reason = "rate_limited";
      continue;
    }
    if (got.status === 409) { await sleep(0.5); reason = "response_lost_after_dispatch"; if (await doubt(op)) continue; return; }
    if (got.status >= 500) { reason = "destination_5xx"; if (await doubt(op)) continue; return; }
    if (got.status === 202 && got.body.operation) return poll(op, att.id, got.body);
    if (got.status < 300) {
      const ref = String(got.body[op.kind.effect_ref_field]);
      if (c.idempotency.style === "none" && c.lookup) {
        const seen = await lookup(op, "read_after_write");
        const all = [...new Set([...seen.refs, ref])].sort();
        if (all.length > 1) return duplicate(op, all, seen.obs);
      }
      return resolve(op, "succeeded", [ref], [att.id], `answered ${got.status}`);
    }
    return resolve(op, "failed", [], [att.id], `refused: ${got.status}`);
  }
}

(async () => {
  for (const intent of DOC.intents) await carryOut(intent);
})().catch((err) => { console.error(err); process.exit(70); });
