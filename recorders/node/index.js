// The recorder a Node (or TypeScript) agent uses to append audit events to the audit log the harness names:
// the same lines harness/recorder.py writes, held to the same JSON Schema (harness/schemas/audit-event.schema.json)
// by tests/recorders. Each call writes one JSON line synchronously, so a crash loses nothing already recorded.
// It decides nothing for the agent; it only makes the contract's field names easy to get right. With
// `{chain: true}` every event also carries `seq`, `prev_hash` and `hash` (harness/chain.py), and a recorder
// reopened on the same file continues the chain, so an agent restart does not break it.

import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";

// names of the contract (harness/contract.py: AUDIT_LOG_ENV, EVENT_NAMES; chain.GENESIS)
export const AUDIT_LOG_ENV = "HARNESS_AUDIT_LOG";
export const EVENT_NAMES = Object.freeze(["operation", "attempt", "observation", "resolution", "approval"]);
export const GENESIS = "sha256:" + "0".repeat(64);

// Python's float repr: the checker re-serialises each parsed line with json.dumps to check its hash, so a
// number must be written the way Python would write it back (1e-05, not 0.00001).
function pythonNumber(n) {
  if (!Number.isFinite(n)) throw new TypeError(`${n} is not a JSON number`);
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return Object.is(n, -0) ? "0" : String(n);  // an int in Python
  const [mantissa, exponent] = n.toExponential().split("e");  // the shortest digits that round-trip
  const digits = mantissa.replace("-", "").replace(".", "");
  const e = Number(exponent);
  const sign = n < 0 ? "-" : "";
  if (e >= -4 && e < 16) {
    if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
    const whole = digits.slice(0, e + 1).padEnd(e + 1, "0");
    return `${sign}${whole}.${digits.slice(e + 1) || "0"}`;
  }
  const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  return `${sign}${head}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}

// keys in code point order, as Python's sort_keys (JavaScript's default sort compares UTF-16 units)
function byCodePoint(a, b) {
  const x = [...a], y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i].codePointAt(0) - y[i].codePointAt(0);
  }
  return x.length - y.length;
}

/** Canonical JSON (harness/fingerprint.py canonical_json): sorted keys, no whitespace, Python's numbers. */
export function canonicalJson(value) {
  if (value !== null && typeof value === "object" && typeof value.toJSON === "function") value = value.toJSON();
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean": return value ? "true" : "false";
    case "number": return pythonNumber(value);
    case "string": return JSON.stringify(value);  // the same escapes as Python's json with ensure_ascii=False
    case "object":
      if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
      return `{${Object.keys(value).filter((k) => value[k] !== undefined).sort(byCodePoint)
        .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
    default: throw new TypeError(`a ${typeof value} is not a JSON value`);
  }
}

/** `sha256:<hex>` of the canonical JSON of a value: the payload fingerprint the proxy and destinations compute. */
export function fingerprint(value) {
  return "sha256:" + createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

/** A short random id with a readable prefix, e.g. `op_3f2a9c1d0b7e`. */
export function newId(prefix) {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}

function eventHash(record) {
  const { hash: _ignored, ...body } = record;
  return fingerprint(body);
}

function linesOf(path) {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").flatMap((line) => {
    try {
      const record = JSON.parse(line);
      return record !== null && typeof record === "object" && !Array.isArray(record) ? [record] : [];
    } catch {
      return [];  // a line that is no event: the checker reports it, not the agent
    }
  });
}

/** `${seq}:${hash}` of the last chained line of an existing log, as `[seq, hash]`, or `[0, GENESIS]`. */
function lastLink(path) {
  const chained = linesOf(path).filter((r) => Number.isInteger(r.seq) && typeof r.hash === "string");
  const last = chained.at(-1);
  return last ? [last.seq, last.hash] : [0, GENESIS];
}

/** What an audit log already holds, keyed `event:id` (operations and resolutions by operation id, attempts by
 * attempt id): a restarted agent reads it to learn where the dead run stopped. */
export function loggedRecords(path) {
  const found = new Map();
  for (const record of linesOf(path)) {
    const key = record.event === "attempt" ? record.attempt_id : record.operation_id;
    if (typeof record.event === "string" && typeof key === "string") found.set(`${record.event}:${key}`, record);
  }
  return found;
}

/** Appends audit events (NDJSON) to one file. */
export class Recorder {
  constructor(path, { sessionId, chain = false } = {}) {
    if (typeof path !== "string" || path === "") throw new TypeError("Recorder: give the audit log's path");
    this.path = path;
    this.sessionId = sessionId ?? newId("ses");
    this.chain = chain;
    mkdirSync(dirname(path), { recursive: true });
    [this.seq, this.prevHash] = chain ? lastLink(path) : [0, ""];
    this.fd = openSync(path, "a");
  }

  /** The recorder for the log the harness named in the environment (HARNESS_AUDIT_LOG). */
  static fromEnv(options = {}) {
    const path = process.env[AUDIT_LOG_ENV];
    if (!path) throw new Error(`${AUDIT_LOG_ENV} is not set: the harness names the audit log there`);
    return new Recorder(path, options);
  }

  /** `SEQ:HASH` of the last chained event (keep it where the agent cannot write), or null unchained. */
  get head() {
    return this.chain ? `${this.seq}:${this.prevHash}` : null;
  }

  emit(event, operationId, fields = {}) {
    if (!EVENT_NAMES.includes(event)) {
      throw new Error(`unknown audit event ${JSON.stringify(event)}; valid: ${EVENT_NAMES.join(", ")}`);
    }
    if (this.fd === null) throw new Error(`Recorder for ${this.path} is closed`);
    const record = { event, ts: Date.now() / 1000, session_id: this.sessionId, operation_id: operationId };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) record[k] = v;  // absent, not null
    if (this.chain) {
      record.seq = ++this.seq;
      record.prev_hash = this.prevHash;
      record.hash = eventHash(record);
      this.prevHash = record.hash;
    }
    writeSync(this.fd, canonicalJson(record) + "\n");
    return record;
  }

  operation(operationId, fields = {}) {
    return this.emit("operation", operationId, { ...fields, state: "open" });
  }

  attempt(operationId, attemptId, dispatchState, fields = {}) {
    return this.emit("attempt", operationId, { ...fields, attempt_id: attemptId, dispatch_state: dispatchState });
  }

  observation(operationId, observationId, fields = {}) {
    return this.emit("observation", operationId, { ...fields, observation_id: observationId });
  }

  resolution(operationId, state, fields = {}) {
    return this.emit("resolution", operationId, { ...fields, state });
  }

  approval(operationId, approvalId, fields = {}) {
    return this.emit("approval", operationId, { ...fields, approval_id: approvalId });
  }

  close() {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
