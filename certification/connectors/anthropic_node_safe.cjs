// The Anthropic TypeScript SDK with maxRetries: 0, and a 429 (the API did nothing) retried by the caller after its
// Retry-After: no blind retry of a message that may have been made and billed. The Python anthropic_safe's twin.
const { Anthropic, RateLimitError } = require("@anthropic-ai/sdk");
const { TIMEOUT, run, sleep } = require("./_harness.cjs");

async function createMessage(url, params) {
  const client = new Anthropic({ apiKey: "sk-ant-harness", baseURL: url, timeout: TIMEOUT * 1000, maxRetries: 0 });
  for (let attempt = 0; ; attempt++) {
    try {
      return (await client.messages.create(params)).id;
    } catch (error) {
      if (!(error instanceof RateLimitError) || attempt === 2) throw error;
      await sleep(Number(error.headers?.get("retry-after") ?? 1));
    }
  }
}

run(createMessage);
