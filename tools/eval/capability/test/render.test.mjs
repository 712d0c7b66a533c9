// The renderer on fixture pages (fixtures/), judged by the same checks as the tasks: a
// moving SVG is animated, a still one is not, a page that shows nothing is caught, a page
// that throws fails the error check, and WebGL gives an FPS (or a skip with a reason when
// this Chromium has no software GL).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { launchBrowser, renderPage, webglAvailable } from "../lib/render.mjs";
import { renderChecks } from "../lib/tasks.mjs";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures");
const TIMES = [300, 800, 1400];
let browser;
// Two frames are enough where nothing is expected to move.
const render = (name, times = TIMES) => renderPage(browser, readFileSync(join(FIXTURES, name), "utf8"), { times });

before(async () => { browser = await launchBrowser(); });
after(async () => { if (browser) await browser.close(); });

test("a moving SVG: renders, no errors, animated", async () => {
  const r = await render("svg_animated.html");
  assert.equal(r.screenshots.length, TIMES.length);
  assert.equal(renderChecks.renders(r).verdict, "pass");
  assert.equal(renderChecks.noErrors(r).verdict, "pass");
  assert.equal(renderChecks.animates(r).verdict, "pass", renderChecks.animates(r).note);
});

test("a still SVG: renders, but the animation check fails", async () => {
  const r = await render("svg_static.html");
  assert.equal(renderChecks.renders(r).verdict, "pass");
  const a = renderChecks.animates(r);
  assert.equal(a.verdict, "fail");
  assert.match(a.note, /^static/);
});

test("a page whose content stays invisible is 'rendered nothing', although its text is in the DOM", async () => {
  const r = await render("blank.html", [300, 700]);
  const v = renderChecks.renders(r);
  assert.equal(v.verdict, "fail");
  assert.match(v.note, /rendered nothing/);
  assert.match(r.text, /Lisbon/);
});

test("a page that throws: console error and uncaught exception reported, error check fails", async () => {
  const r = await render("throws.html", [300, 700]);
  assert.equal(renderChecks.renders(r).verdict, "pass");
  assert.ok(r.pageErrors.some((e) => /reading 'add'/.test(e)), JSON.stringify(r.pageErrors));
  assert.ok(r.consoleErrors.some((e) => /vec5/.test(e)), JSON.stringify(r.consoleErrors));
  assert.equal(renderChecks.noErrors(r).verdict, "fail");
});

test("network requests are blocked and reported", async () => {
  const r = await renderPage(browser, '<html><body><h1>x</h1><script src="https://cdn.example.com/three.js"></script></body></html>', { times: [200, 400] });
  assert.deepEqual(r.blocked, ["https://cdn.example.com/three.js"]);
  assert.equal(renderChecks.noErrors(r).verdict, "fail");
});

test("WebGL: a context, frames per second > 0 (or skipped when this Chromium has no WebGL)", async (t) => {
  const env = { webgl: await webglAvailable(browser) };
  const r = await render("webgl.html");
  if (!env.webgl.ok) {
    const v = renderChecks.fps({ render: r }, env);
    assert.equal(v.verdict, "skipped");
    t.skip(`no WebGL in this Chromium: ${env.webgl.reason}`);
    return;
  }
  assert.equal(renderChecks.webgl({ render: r }, env).verdict, "pass");
  assert.ok(r.glFps > 0, `glFps ${r.glFps}`);
  const fps = renderChecks.fps({ render: r }, env);
  assert.notEqual(fps.verdict, "skipped");
  assert.match(fps.note, /FPS/);
  assert.equal(renderChecks.animates(r).verdict, "pass");
});

test("without WebGL the FPS item is skipped with the reason, not a crash", () => {
  const v = renderChecks.fps({ render: null }, { webgl: { ok: false, reason: "getContext('webgl') returned null" } });
  assert.equal(v.verdict, "skipped");
  assert.match(v.note, /returned null/);
});
