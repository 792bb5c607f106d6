// The Anthropic TypeScript SDK (@anthropic-ai/sdk), defaults: maxRetries 2 on a connection error, a timeout, 408,
// 409, 429 and 5xx, honouring Retry-After / retry-after-ms; no Idempotency-Key (the API takes none). The Python
// anthropic_default's twin.
const { Anthropic } = require("@anthropic-ai/sdk");
const { TIMEOUT, run } = require("./_harness.cjs");

async function createMessage(url, params) {
  const client = new Anthropic({ apiKey: "sk-ant-harness", baseURL: url, timeout: TIMEOUT * 1000 });
  return (await client.messages.create(params)).id;
}

run(createMessage);
