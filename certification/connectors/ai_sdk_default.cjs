// The Vercel AI SDK's generateText on its OpenAI provider (chat completions), defaults: maxRetries 2, on what
// the provider calls retryable (a connection lost, 408, 409, 429, 5xx), with exponential backoff from 2 s that
// honours Retry-After. Its own timeout (and an abort signal) spans the retries: the request's timeout is the
// fetch's here, and a fetch that timed out is an abort, which it never retries.
const { generateText } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { fetchWithTimeout, run } = require("./_harness.cjs");

async function createChatCompletion(url, { model, messages }) {
  const provider = createOpenAI({ apiKey: "sk-harness", baseURL: url + "/v1", fetch: fetchWithTimeout });
  const result = await generateText({ model: provider.chat(model), messages });
  return result.response.id;
}

run(createChatCompletion);
