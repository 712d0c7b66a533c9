// A minimal OpenAI-compatible client over node:http(s): one JSON request, no streaming. Not
// fetch(): Node's fetch gives up when the response headers take more than 300 s, and a
// non-streamed reply of a large model on a small machine can take far longer.
import http from "node:http";
import https from "node:https";

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

export function request(baseUrl, method, path, { body, apiKey, timeoutMs = 60_000 } = {}) {
  const url = new URL(path, baseUrl.endsWith("/") ? baseUrl : baseUrl + "/");
  const lib = url.protocol === "https:" ? https : http;
  const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
  const headers = { Accept: "application/json" };
  if (data) { headers["Content-Type"] = "application/json"; headers["Content-Length"] = data.length; }
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  return new Promise((resolve, reject) => {
    const req = lib.request(url, { method, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
        if (res.statusCode < 200 || res.statusCode >= 300) {
          const msg = json && json.error ? (json.error.message || JSON.stringify(json.error)) : text.slice(0, 300);
          reject(new ApiError(`HTTP ${res.statusCode} from ${method} ${url.pathname}: ${msg}`, res.statusCode));
        } else if (json === null) {
          reject(new ApiError(`${method} ${url.pathname}: the answer is not JSON`, res.statusCode));
        } else {
          resolve(json);
        }
      });
      res.on("error", reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new ApiError(`${method} ${url.pathname}: no answer within ${Math.round(timeoutMs / 1000)} s (--timeout)`)));
    req.on("error", reject);
    if (data) req.write(data);
    req.end();
  });
}

// GET that never throws: null when the endpoint is missing (not every server has /props).
// A refused key (401/403) is thrown, though: every request of the run would fail the same way.
export async function tryGet(baseUrl, path, apiKey) {
  try {
    return await request(baseUrl, "GET", path, { apiKey, timeoutMs: 15_000 });
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
      throw new Error(`${baseUrl} refused the request (${e.message}): give the server's key with --api-key or OPENAI_API_KEY`);
    }
    return null;
  }
}

// One chat completion. params: model, max_tokens, temperature, seed, extra (merged last).
// Returns { content, reasoning, finish_reason, usage, timings, seconds, model }.
export async function chat(baseUrl, messages, params, { apiKey, timeoutMs }) {
  const body = { messages, stream: false };
  if (params.model) body.model = params.model;
  if (params.max_tokens) body.max_tokens = params.max_tokens;
  if (params.temperature !== undefined) body.temperature = params.temperature;
  if (params.seed !== undefined) body.seed = params.seed;
  Object.assign(body, params.extra || {});
  const t0 = Date.now();
  const res = await request(baseUrl, "POST", "v1/chat/completions", { body, apiKey, timeoutMs });
  const choice = res.choices && res.choices[0];
  if (!choice || !choice.message) throw new ApiError("the answer has no choices[0].message");
  const msg = choice.message;
  return {
    content: typeof msg.content === "string" ? msg.content : "",
    reasoning: msg.reasoning_content || msg.reasoning || "",
    finish_reason: choice.finish_reason ?? null,
    usage: res.usage || null,
    timings: res.timings || null,
    seconds: (Date.now() - t0) / 1000,
    model: res.model || null,
  };
}
