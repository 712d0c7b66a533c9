// Talks to a running `moetier serve` with the official `openai` npm package, the way an
// application would. Usage: node openai_client.mjs BASE_URL API_KEY
// Prints one line per check and exits non-zero on the first failure.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
if (!baseURL || !apiKey) {
  console.error("usage: node openai_client.mjs BASE_URL API_KEY");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
check(ids.length === 1, `models.list returns one model (${ids.join(", ")})`);
const model = ids[0];

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say something." },
];
const full = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
check(full.object === "chat.completion", "chat.completions.create returns a chat.completion");
check(typeof full.choices[0].message.content === "string", "the reply has string content");
check(full.usage.completion_tokens > 0 && full.usage.total_tokens === full.usage.prompt_tokens + full.usage.completion_tokens,
      "usage adds up");

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let streamed = "";
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check(streamed === full.choices[0].message.content, "the streamed reply equals the non-streamed one");
check(finish === full.choices[0].finish_reason, `stream finish_reason ${finish}`);
check(usage && usage.completion_tokens === full.usage.completion_tokens, "stream_options.include_usage gives usage");

const completion = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8, temperature: 0 });
check(completion.object === "text_completion" && typeof completion.choices[0].text === "string", "completions.create");

const withLogprobs = await client.chat.completions.create({
  model, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
});
const lp = withLogprobs.choices[0].logprobs.content;
check(lp.length === withLogprobs.usage.completion_tokens && lp[0].top_logprobs.length === 2, "logprobs with top_logprobs");

try {
  await client.chat.completions.create({ model, messages: [], max_tokens: 4 });
  check(false, "an empty messages array is rejected");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400, `empty messages -> BadRequestError 400 (${e.message})`);
}
// As llama-server serving one model: any model name is accepted and answered by it.
const otherName = await client.chat.completions.create({ model: "gpt-3.5-turbo", messages, max_tokens: 2 });
check(otherName.model === model && otherName.choices.length === 1, "any model name is served by the model");
const two = await client.chat.completions.create({ model, messages, max_tokens: 3, n: 2 });
check(two.choices.length === 2 && two.choices[1].index === 1, "n = 2 gives two choices");
const wrongKey = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
try {
  await wrongKey.models.list();
  check(false, "a wrong API key is rejected");
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, "wrong API key -> AuthenticationError 401");
}
console.log("all checks passed");
