// A scripted OpenAI-compatible server for the pipeline test: it answers each task with a
// fixture page or a known answer, so every branch of the harness (rendering, the WebGL
// repair loop, the puzzle checkers, the report) runs with known verdicts and no model.
import http from "node:http";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures");
const fixture = (name) => readFileSync(join(FIXTURES, name), "utf8");
const fenced = (code) => "Here is the file.\n\n```html\n" + code + "\n```\n";

// The WebGL page of the first turn: a typo in a method name, as models make.
export const BROKEN_WEBGL = fixture("webgl.html").replace("gl.linkProgram(prog);", "gl.linkProgramm(prog);");

function reply(messages) {
  const first = messages[0].content;
  const last = messages[messages.length - 1].content;
  if (/bicycle/.test(first)) return fenced(fixture("svg_animated.html"));
  if (/WebGL/.test(first)) {
    if (messages.length === 1) return fenced(BROKEN_WEBGL);
    return /linkProgramm is not a function/.test(last) ? "Fixed:\n" + fenced(fixture("webgl.html")) : "I cannot fix it.";
  }
  if (/weather card/.test(first)) return fenced(fixture("blank.html"));
  if (/candies/.test(first)) return "Work backwards: 6 left after Carla took half, so 12; plus Ben's 2 is 14; that is two thirds, so 21.\n\nAnswer: 21";
  if (/colour blindness/.test(first)) {
    return "<think>The daughter is XcXc.</think>A colour-blind daughter needs an X^c from each parent; the father has only one X.\n\nAnswer: The father is red-green colour-blind (the mother is a carrier).";
  }
  return "?";
}

// apiKey: when given, requests without `Authorization: Bearer KEY` get a 401.
export function startFakeServer({ apiKey } = {}) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", () => {
      const send = (status, obj) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(obj));
      };
      if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) return send(401, { error: { message: "invalid API key" } });
      if (req.method === "GET" && req.url === "/v1/models") return send(200, { object: "list", data: [{ id: "scripted", object: "model" }] });
      if (req.method === "POST" && req.url === "/v1/chat/completions") {
        const json = JSON.parse(body);
        requests.push(json);
        const content = reply(json.messages);
        return send(200, { object: "chat.completion", model: "scripted",
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
          usage: { prompt_tokens: 10, completion_tokens: content.length, total_tokens: 10 + content.length } });
      }
      send(404, { error: { message: "not found" } });
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`, requests, close: () => new Promise((r) => server.close(r)),
  })));
}
