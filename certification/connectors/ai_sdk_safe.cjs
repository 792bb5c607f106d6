// The Vercel AI SDK's generateText with maxRetries: 0, and a 429 (the API did nothing) retried by the caller
// after its Retry-After: no blind retry of a completion that may have been made and billed.
const { APICallError, generateText } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { OutcomeUnknown, fetchWithTimeout, run, sleep } = require("./_harness.cjs");

async function createChatCompletion(url, { model, messages }) {
  const provider = createOpenAI({ apiKey: "sk-harness", baseURL: url + "/v1", fetch: fetchWithTimeout });
  for (let attempt = 0; ; attempt++) {
    try {
      const result = await generateText({ model: provider.chat(model), messages, maxRetries: 0 });
      return result.response.id;
    } catch (error) {
      if (APICallError.isInstance(error) && error.statusCode >= 500) {
        throw new OutcomeUnknown(`HTTP ${error.statusCode} after a write that may have committed`, { cause: error });
      }
      if (!APICallError.isInstance(error) || error.statusCode !== 429 || attempt === 2) throw error;
      await sleep(Number(error.responseHeaders?.["retry-after"] ?? 1));
    }
  }
}

run(createChatCompletion);
