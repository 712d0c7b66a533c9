// The whole harness against a scripted OpenAI-compatible server (fake_server.mjs): known
// replies give known verdicts, the WebGL task is repaired in its second turn after the
// console error is sent back, and a human override made in the report page is saved as
// overrides.json and applied by --report-only.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeServer } from "./fake_server.mjs";
import { runCommand, openReport } from "./helpers.mjs";
import { launchBrowser } from "../lib/render.mjs";

const RUN = join(dirname(fileURLToPath(import.meta.url)), "..", "run.mjs");
let server, browser, out;
before(async () => {
  server = await startFakeServer();
  browser = await launchBrowser();
  out = mkdtempSync(join(tmpdir(), "moetier-capability-pipeline-"));
});
after(async () => {
  if (server) await server.close();
  if (browser) await browser.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

const readJsonl = (f) => readFileSync(f, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));

test("the scripted run: verdicts, repair loop, request fields, outputs; then an override from the page", async () => {
  const run = await runCommand("node", [RUN, "--url", server.url, "--out", out, "--frames", "200,600,1000",
    "--repair-turns", "2", "--max-tokens", "321", "--temperature", "0.6", "--seed", "7", "--extra", '{"top_k":20}']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /capability-v1: 4 pass, 0 partial, 1 fail/);

  const results = Object.fromEntries(readJsonl(join(out, "results.jsonl")).map((r) => [r.task, r]));
  const items = (task) => Object.fromEntries(results[task].items.map((i) => [i.id, i.verdict]));
  assert.equal(results["svg-cyclist"].overall, "pass");
  assert.deepEqual(items("svg-cyclist"), { code: "pass", renders: "pass", "no-errors": "pass", animates: "pass", knees: "pass", complete: "pass" });

  const gl = results["webgl-scene"];
  assert.equal(gl.turns.length, 2);
  assert.ok(gl.turns[0].render.pageErrors.some((e) => /linkProgramm is not a function/.test(e)));
  assert.match(gl.turns[1].feedback, /linkProgramm is not a function/);
  assert.match(items("webgl-scene").repair, /pass/);
  assert.match(gl.items.find((i) => i.id === "repair").note, /fixed in turn 2 of 3/);
  assert.equal(items("webgl-scene")["no-errors"], "pass");
  assert.ok(["pass", "skipped", "partial", "fail"].includes(items("webgl-scene").fps));
  assert.equal(items("webgl-scene").webgl, "pass");

  assert.equal(results["weather-card"].overall, "fail");
  assert.equal(items("weather-card").renders, "fail");
  assert.equal(results["candy-count"].overall, "pass");
  assert.equal(results["colour-blindness"].overall, "pass");

  // The second WebGL request carries the conversation: prompt, first reply, the errors.
  const glRequests = server.requests.filter((r) => /WebGL/.test(r.messages[0].content));
  assert.equal(glRequests.length, 2);
  assert.deepEqual(glRequests[1].messages.map((m) => m.role), ["user", "assistant", "user"]);
  for (const r of server.requests) {
    assert.equal(r.stream, false);
    assert.deepEqual([r.max_tokens, r.temperature, r.seed, r.top_k, r.model], [321, 0.6, 7, 20, "scripted"]);
  }
  // Outputs.
  const prov = JSON.parse(readFileSync(join(out, "provenance.json"), "utf8"));
  assert.equal(prov.server_url, server.url);
  assert.equal(prov.server_model, "scripted");
  assert.equal(readdirSync(join(out, "screenshots")).length, 4 * 3);  // 3 render tasks, the WebGL one twice, 3 frames each
  assert.ok(existsSync(join(out, "code", "webgl-scene-turn1.html")));

  // The report page: no errors, screenshots inline, an override saved as overrides.json.
  const { page, context, errors } = await openReport(browser, join(out, "report.html"), { downloadPath: out });
  try {
    assert.ok(await page.$$eval("img", (imgs) => imgs.every((i) => i.src.startsWith("data:image/png;base64,") && i.naturalWidth > 0)));
    assert.equal((await page.$$("img")).length, 12);
    await page.select('tr[data-task="svg-cyclist"][data-item="knees"] select.ov', "partial");
    await page.type('tr[data-task="svg-cyclist"][data-item="knees"] input.ov-note', "the shin swings with the thigh");
    await page.$eval('tr[data-task="svg-cyclist"][data-item="knees"] input.ov-note', (e) => e.dispatchEvent(new Event("change", { bubbles: true })));
    assert.match(await page.$eval("#sum-svg-cyclist", (e) => e.textContent), /partial/);
    await page.select('tr[data-task="weather-card"][data-item="overall"] select.ov', "partial");
    assert.match(await page.$eval("#ov-count", (e) => e.textContent), /2 overrides/);
    await page.click("#ov-save");
    const file = join(out, "overrides.json");
    for (let i = 0; i < 100 && !existsSync(file); ++i) await new Promise((r) => setTimeout(r, 50));
    assert.ok(existsSync(file), "overrides.json was downloaded");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
  const saved = JSON.parse(readFileSync(join(out, "overrides.json"), "utf8"));
  assert.deepEqual(saved.overrides["svg-cyclist"].knees, { verdict: "partial", note: "the shin swings with the thigh" });

  const again = await runCommand("node", [RUN, "--report-only", out]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /svg-cyclist\s+partial\s+\(with human overrides\)/);
  assert.match(again.stdout, /capability-v1: 3 pass, 2 partial, 0 fail/);
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
  const svg = summary.tasks.find((t) => t.task === "svg-cyclist");
  assert.deepEqual([svg.verdict, svg.automatic, svg.overridden, svg.items.knees], ["partial", "pass", true, "partial"]);
  const html = readFileSync(join(out, "report.html"), "utf8");
  assert.match(html, /the shin swings with the thigh/);
});

test("a server that wants a key: refused without it (exit 1, one line), sent with --api-key", async () => {
  const keyed = await startFakeServer({ apiKey: "sekrit" });
  const dir = mkdtempSync(join(tmpdir(), "moetier-capability-key-"));
  try {
    const without = await runCommand("node", [RUN, "--url", keyed.url, "--out", dir, "--tasks", "candy-count"], { env: { OPENAI_API_KEY: "" } });
    assert.equal(without.code, 1, without.stderr);
    assert.match(without.stderr, /refused the request \(HTTP 401.*--api-key or OPENAI_API_KEY/);
    const withKey = await runCommand("node", [RUN, "--url", keyed.url, "--out", dir, "--tasks", "candy-count", "--api-key", "sekrit"]);
    assert.equal(withKey.code, 0, withKey.stderr);
    assert.match(withKey.stdout, /candy-count\s+pass/);
    assert.doesNotMatch(readFileSync(join(dir, "provenance.json"), "utf8"), /sekrit/);
  } finally {
    await keyed.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("usage errors exit 2 with one line", async () => {
  for (const [args, msg] of [[[], /either --url URL or -m MODEL/], [["--url", "x"], /must start with http/],
    [["--url", "http://h", "--tasks", "nope"], /unknown task 'nope'/], [["--url", "http://h", "--bogus"], /unknown option '--bogus'/],
    [["--report-only", "/nonexistent-dir"], /results.jsonl not found/]]) {
    const r = await runCommand("node", [RUN, ...args]);
    assert.equal(r.code, 2, `${args}: ${r.stderr}`);
    assert.match(r.stderr, msg);
  }
  const help = await runCommand("node", [RUN, "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--repair-turns N/);
});
