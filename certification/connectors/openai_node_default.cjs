// openai-node, defaults: maxRetries 2 on a connection error, a timeout, 408, 409, 429 and 5xx, honouring
// Retry-After / retry-after-ms; no Idempotency-Key (the API takes none). The Python openai_default's twin.
const { OpenAI } = require("openai");
const { TIMEOUT, run } = require("./_harness.cjs");

async function createChatCompletion(url, params) {
  const client = new OpenAI({ apiKey: "sk-harness", baseURL: url + "/v1", timeout: TIMEOUT * 1000 });
  return (await client.chat.completions.create(params)).id;
}

run(createChatCompletion);
