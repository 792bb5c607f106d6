// What _harness.cjs's told() makes of real errors (tests/certification/test_caller_view.py): `node told_errors.cjs
// PATH_OF_HARNESS_CJS` prints one JSON object, each case's outcome.
const net = require("node:net");
const { OutcomeUnknown, told } = require(process.argv[2]);
async function outcome(action) { try { await action(); return "returned"; } catch (error) { return told(error); } }
(async () => {
  const server = net.createServer((socket) => socket.once("data", () => socket.destroy()));  // read, then hang up
  await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
  const hung = net.createServer(() => {});  // reads and never answers
  await new Promise((ready) => hung.listen(0, "127.0.0.1", ready));
  const said = {
    dropped: await outcome(() => fetch(`http://127.0.0.1:${server.address().port}/orders`, { method: "POST", body: "{}" })),
    timed_out: await outcome(() => fetch(`http://127.0.0.1:${hung.address().port}/orders`,
                                         { method: "POST", body: "{}", signal: AbortSignal.timeout(200) })),
    said_unknown: await outcome(async () => { throw new OutcomeUnknown("HTTP 500", { cause: new Error("500") }); }),
    wrapped_timeout: await outcome(async () => { throw new Error("gave up", { cause: new DOMException("t", "TimeoutError") }); }),
    answered_failed: await outcome(async () => { const e = new Error("HTTP 500"); e.status = 500; throw e; }),
  };
  server.close(); hung.closeAllConnections?.(); hung.close();
  console.log(JSON.stringify(said));
})();
