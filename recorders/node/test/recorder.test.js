// node --test: the recorder on its own, no network. tests/recorders/test_node_recorder.py runs these from pytest
// and also holds the lines they write to the Python side (the JSON Schema, harness.chain.verify, the checker).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { canonicalJson, EVENT_NAMES, fingerprint, GENESIS, loggedRecords, newId, Recorder } from "../index.js";

const folder = mkdtempSync(join(tmpdir(), "recorder-test-"));
after(() => rmSync(folder, { recursive: true, force: true }));
let files = 0;
const newLog = () => join(folder, `log-${++files}`, "audit.ndjson");
const lines = (path) => readFileSync(path, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l));

test("canonical JSON is Python's json.dumps(sort_keys=True, separators=(',', ':'), ensure_ascii=False)", () => {
  // the expected text and hash were printed by harness.fingerprint.canonical_json / fingerprint on this value
  const value = { title: "Printer on fire", n: [1, 2.5, 1e-5, 1e16, 0.1, -0, 123456789.125],
    z: "é\u2028\n\u0001\"", b: true, c: null, a: { y: 1, x: [] } };
  assert.equal(canonicalJson(value),
    '{"a":{"x":[],"y":1},"b":true,"c":null,"n":[1,2.5,1e-05,10000000000000000,0.1,0,123456789.125],' +
    '"title":"Printer on fire","z":"é\u2028\\n\\u0001\\""}');
  assert.equal(canonicalJson([1.5e-7, 0.0001, 1e300, 1e21, 5e-324, 0.1 + 0.2, -3.25e-10]),
    "[1.5e-07,0.0001,1e+300,1e+21,5e-324,0.30000000000000004,-3.25e-10]");
  assert.equal(canonicalJson({ "\u{1F600}": 1, "\uFFFD": 2 }), '{"\uFFFD":2,"\u{1F600}":1}');  // code point order
  assert.equal(fingerprint({ b: 1, a: "x" }), fingerprint({ a: "x", b: 1 }));
  assert.match(fingerprint({}), /^sha256:[0-9a-f]{64}$/);
  assert.throws(() => canonicalJson({ n: Number.NaN }), /NaN is not a JSON number/);
  assert.throws(() => canonicalJson({ n: 1n }), /bigint is not a JSON value/);
});

test("every event is one line with the contract's fields; null and undefined fields are left out", () => {
  const path = newLog();
  const recorder = new Recorder(path, { sessionId: "ses_1" });
  recorder.operation("op_1", { intent_id: "i1", idempotency_key: "key_1", supersedes_operation_id: undefined });
  recorder.attempt("op_1", "att_1", "sent_no_response", { attempt_number: 1, http_status: null });
  recorder.observation("op_1", "obs_1", { source: "lookup", found: true, effect_refs: ["tkt_1"] });
  recorder.resolution("op_1", "succeeded", { effect_refs: ["tkt_1"], evidence: ["obs_1"] });
  recorder.approval("op_1", "apr_1", { decision: "approved", scope: "close", ts: "2026-12-07T10:00:00Z" });
  recorder.close();
  const events = lines(path);
  assert.deepEqual(events.map((e) => e.event), EVENT_NAMES);
  assert.ok(events.every((e) => e.session_id === "ses_1" && e.operation_id === "op_1"));
  assert.equal(events[0].state, "open");
  assert.equal("supersedes_operation_id" in events[0], false);
  assert.equal("http_status" in events[1], false);
  assert.equal(events[1].dispatch_state, "sent_no_response");
  assert.equal(events[4].ts, "2026-12-07T10:00:00Z");  // a ts given is kept
  assert.ok(typeof events[0].ts === "number" && Math.abs(events[0].ts - Date.now() / 1000) < 60);
  assert.equal(recorder.head, null);
});

test("an unknown event, a missing log variable and a closed recorder are clear errors", () => {
  const recorder = new Recorder(newLog());
  assert.throws(() => recorder.emit("retry", "op_1"),
    /unknown audit event "retry"; valid: operation, attempt, observation, resolution, approval/);
  recorder.close();
  assert.throws(() => recorder.operation("op_1"), /is closed/);
  const saved = process.env.HARNESS_AUDIT_LOG;
  delete process.env.HARNESS_AUDIT_LOG;
  try {
    assert.throws(() => Recorder.fromEnv(), /HARNESS_AUDIT_LOG is not set/);
  } finally {
    if (saved !== undefined) process.env.HARNESS_AUDIT_LOG = saved;
  }
});

test("a chained log links every event, and a recorder reopened on it continues the chain", () => {
  const path = newLog();
  const first = new Recorder(path, { chain: true });
  first.operation("op_1");
  first.attempt("op_1", "att_1", "sent_no_response");
  first.close();
  const second = new Recorder(path, { chain: true });  // the agent restarted
  second.resolution("op_1", "unknown", { reason: "an operator decides" });
  second.close();
  const events = lines(path);
  assert.deepEqual(events.map((e) => e.seq), [1, 2, 3]);
  assert.equal(events[0].prev_hash, GENESIS);
  for (const [i, e] of events.entries()) {
    const { hash, ...body } = e;
    assert.equal(hash, fingerprint(body));
    if (i > 0) assert.equal(e.prev_hash, events[i - 1].hash);
  }
  assert.equal(second.head, `3:${events[2].hash}`);
  assert.notEqual(first.sessionId, second.sessionId);  // a new process, a new session
});

test("loggedRecords tells a restarted agent what the dead run logged, skipping lines that are no event", () => {
  const path = newLog();
  const recorder = new Recorder(path);
  recorder.operation("op_1", { intent_id: "i1" });
  recorder.attempt("op_1", "att_1", "sent_no_response");
  recorder.close();
  writeFileSync(path, readFileSync(path, "utf8") + "not json\n[1]\n");
  const found = loggedRecords(path);
  assert.deepEqual([...found.keys()], ["operation:op_1", "attempt:att_1"]);
  assert.equal(found.get("operation:op_1").intent_id, "i1");
  assert.equal(loggedRecords(join(folder, "none.ndjson")).size, 0);
  assert.match(newId("op"), /^op_[0-9a-f]{12}$/);
});
