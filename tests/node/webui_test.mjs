// The chat page of `moetier serve` (src/server/webui/) in headless Chromium, driven by
// puppeteer-core: the API-key prompt, a streamed chat, the stop button, markdown, reasoning,
// error display and a phone-width layout. The model has random weights, so the replies are
// noise: the checks look at whether text arrives and grows, not at what it says.
// Usage: node webui_test.mjs BASE_URL API_KEY SCREENSHOT.png   (CHROMIUM_PATH: the browser)
// Prints one line per check and exits non-zero on the first failure.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import puppeteer from "puppeteer-core";

const [base, apiKey, screenshot] = process.argv.slice(2);
if (!base || !apiKey || !screenshot) {
  console.error("usage: node webui_test.mjs BASE_URL API_KEY SCREENSHOT.png");
  process.exit(2);
}
const WAIT = { timeout: 60_000 };

let browser = null;
let page = null;
const profile = mkdtempSync(join(tmpdir(), "moetier-webui-"));
async function fail(what) {
  console.error(`FAIL: ${what}`);
  // What the page itself says went wrong, if anything.
  const shown = page && await page.evaluate(() => [...document.querySelectorAll(".error")].map((e) => e.textContent)).catch(() => null);
  if (shown && shown.length) console.error(`errors shown on the page: ${shown.join(" | ")}`);
  if (browser) await browser.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
async function check(cond, what) {
  if (!cond) await fail(what);
  console.log(`ok: ${what}`);
}

browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
try {
  await run();
} catch (e) {
  await fail(`exception: ${e && e.stack ? e.stack : e}`);
}
await browser.close();
rmSync(profile, { recursive: true, force: true });
console.log("all checks passed");

async function run() {
  mkdirSync(dirname(screenshot), { recursive: true });
  page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 850 });
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    // 401s are expected (the key prompt); anything else, a CSP violation above all, is not.
    if (m.type() === "error" && !/status of 40[01]/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  await browser.defaultBrowserContext().overridePermissions(base, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);

  const res = await page.goto(base + "/", { waitUntil: "load" });
  await check(res.status() === 200 && res.headers()["content-type"].startsWith("text/html"), "GET / is the HTML page");

  // --- the API key: asked for after the 401 on /v1/models; a wrong one is refused.
  await page.waitForSelector("#key-dialog[open]", WAIT);
  await check(true, "the page asks for the API key when /v1/models answers 401");
  await page.type("#key-input", "wrong-key");
  await page.click("#save-key");
  await page.waitForFunction(() => {
    const e = document.getElementById("key-error");
    return document.getElementById("key-dialog").open && !e.hidden && /invalid API key/.test(e.textContent);
  }, WAIT);
  await check(true, "a wrong key is refused and the dialog says why");
  await page.type("#key-input", apiKey);
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.getElementById("model").textContent === "moetier-small", WAIT);
  await check(await page.evaluate(() => !document.getElementById("key-dialog").open), "the right key closes the dialog");
  await check(await page.evaluate((k) => JSON.parse(localStorage.getItem("moetier.apiKey")) === k, apiKey),
              "the key is kept in localStorage; the model name comes from /v1/models");

  // --- settings: saved in localStorage, sent with the request.
  await page.click("#open-settings");
  await page.waitForSelector("#settings[open]", WAIT);
  await check(await page.$eval("input[name=temperature]", (e) => e.placeholder !== ""),
              "the settings show the server's defaults (/props) as placeholders");
  await page.type("textarea[name=extra]", "[1]");
  await page.click("#save-settings");
  await check(await page.$eval("#settings-error", (e) => !e.hidden && document.getElementById("settings").open),
              "extra request fields that are not a JSON object are refused");
  await page.$eval("textarea[name=extra]", (e) => { e.value = '{"seed": 7}'; });
  await page.type("input[name=max_tokens]", "16");
  await page.type("input[name=top_k]", "40");
  await page.type("#s-system", "You are a test.");
  await page.click("#save-settings");
  await page.waitForFunction(() => !document.getElementById("settings").open, WAIT);
  const saved = await page.evaluate(() => JSON.parse(localStorage.getItem("moetier.settings")));
  await check(saved.max_tokens === "16" && saved.top_k === "40" && saved.extra === '{"seed": 7}' &&
              saved.system === "You are a test.", "settings are saved in localStorage");

  // --- a short chat: the reply streams in and ends with the speed from `timings`.
  let sentBody = null;
  page.on("request", (r) => {
    if (r.url().endsWith("/v1/chat/completions")) sentBody = JSON.parse(r.postData());
  });
  await page.type("#input", "Hello there");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg.user").length === 1, WAIT);
  await page.waitForFunction(() => {
    const meta = document.querySelector(".msg.assistant .meta");
    return meta && /tokens\/s/.test(meta.textContent);
  }, WAIT);
  const first = await page.evaluate(() => ({
    text: document.querySelector(".msg.assistant .body").textContent,
    meta: document.querySelector(".msg.assistant .meta").textContent,
  }));
  await check(first.text.length > 0, `the assistant's reply appears (${JSON.stringify(first.text.slice(0, 40))}…)`);
  await check(/^\d+ tokens · [0-9.]+ tokens\/s/.test(first.meta), `tokens/s from the final chunk (${first.meta})`);
  await check(sentBody && sentBody.stream === true && sentBody.max_tokens === 16 && sentBody.top_k === 40 &&
              sentBody.seed === 7 && sentBody.model === "moetier-small" && sentBody.messages[0].role === "system",
              "the request streams and carries the settings");

  // --- a long reply: it grows while streaming, and Stop ends it.
  await page.evaluate(() => {
    const s = JSON.parse(localStorage.getItem("moetier.settings"));
    s.max_tokens = "";
    s.extra = '{"ignore_eos": true, "max_tokens": -1}';  // until the slot's context is full
    localStorage.setItem("moetier.settings", JSON.stringify(s));
  });
  await page.type("#input", "Tell me a long story");
  await page.click("#send");
  const lengthOfLast = () => {
    const all = document.querySelectorAll(".msg.assistant .body");
    return all.length === 2 ? all[1].textContent.length : 0;
  };
  await page.waitForFunction(lengthOfLast, WAIT);
  const early = await page.evaluate(lengthOfLast);
  await page.waitForFunction((n) => {
    const all = document.querySelectorAll(".msg.assistant .body");
    return all[1].textContent.length > n + 20;
  }, WAIT, early);
  await check(await page.$eval("#stop", (e) => !e.hidden) && await page.$eval("#send", (e) => e.hidden),
              "while streaming the Send button gives way to Stop");
  await page.click("#stop");
  await page.waitForFunction(() => !document.getElementById("send").hidden, WAIT);
  const stopped = await page.evaluate(lengthOfLast);
  await new Promise((r) => setTimeout(r, 700));
  const later = await page.evaluate(lengthOfLast);
  await check(stopped > early && later === stopped, `the reply grew (${early} → ${stopped} chars) and Stop ended it`);
  await check(/stopped/.test(await page.$eval(".msg.assistant:last-of-type .meta", (e) => e.textContent)),
              "the stopped reply is marked so");

  // --- markdown: the renderer on a sample, shown as a reply.
  const sample = [
    "## Heading two", "", "Some **bold**, *italic* and `inline <code>` with a [link](https://example.com/a?b=1&c=2).",
    "", "- one", "- two", "  - nested", "", "1. first", "2. second", "", "```python", "print('<b>hi</b>')", "```",
    "", "<img src=x onerror=\"window.pwned=1\"> [bad](javascript:window.pwned=2) <script>window.pwned=3</script>",
  ].join("\n");
  const md = await page.evaluate((text) => {
    const el = window.moetierChat.showReply(text);
    const body = el.querySelector(".body");
    const a = body.querySelector("a");
    return {
      h2: body.querySelector("h2")?.textContent, strong: body.querySelector("strong")?.textContent,
      em: body.querySelector("em")?.textContent, code: body.querySelector("p code")?.textContent,
      href: a?.getAttribute("href"), rel: a?.getAttribute("rel"), links: body.querySelectorAll("a").length,
      items: body.querySelectorAll(":scope > ul > li").length, nested: body.querySelectorAll("ul ul li").length,
      ordered: body.querySelectorAll("ol > li").length, block: body.querySelector(".codeblock code")?.textContent,
      lang: body.querySelector(".codeblock .head span")?.textContent, copy: !!body.querySelector(".codeblock button.copy"),
      unsafe: body.querySelectorAll("img, script, [onerror]").length, pwned: window.pwned,
    };
  }, sample);
  await check(md.h2 === "Heading two" && md.strong === "bold" && md.em === "italic" && md.code === "inline <code>",
              "markdown: heading, bold, italic, inline code");
  await check(md.href === "https://example.com/a?b=1&c=2" && md.rel === "noopener noreferrer" && md.links === 1,
              "markdown: the https link is kept, the javascript: one is not");
  await check(md.items === 2 && md.nested === 1 && md.ordered === 2, "markdown: lists, nested and ordered");
  await check(md.block === "print('<b>hi</b>')" && md.lang === "python" && md.copy, "markdown: fenced code with a copy button");
  await check(md.unsafe === 0 && md.pwned === undefined, "markdown: raw HTML is shown as text, never run");
  await page.click(".msg.assistant:last-of-type button.copy");
  await page.waitForFunction(() => /Cop(ied|y failed)/.test(document.querySelector(".msg.assistant:last-of-type button.copy").textContent), WAIT);
  const copied = await page.evaluate(() => navigator.clipboard.readText().catch(() => null));
  await check(copied === "print('<b>hi</b>')", "the copy button puts the code on the clipboard");
  await page.screenshot({ path: screenshot, fullPage: true });
  await check(true, `screenshot saved to ${screenshot}`);

  // --- a phone-width layout, with the conversation so far.
  await page.setViewport({ width: 375, height: 720 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await check(overflow <= 0, "no sideways scrolling at 375 px");
  await page.screenshot({ path: screenshot.replace(/\.png$/, "") + "-mobile.png" });
  await page.setViewport({ width: 1100, height: 850 });

  // --- canned server answers: reasoning + timings, then an error, without the model.
  await page.setRequestInterception(true);
  let canned = null;
  const intercept = (r) => {
    if (r.isInterceptResolutionHandled()) return;
    if (canned && r.url().endsWith("/v1/chat/completions")) return r.respond(canned);
    r.continue();
  };
  page.on("request", intercept);
  const event = (o) => `data: ${JSON.stringify(o)}\n\n`;
  canned = {
    status: 200, contentType: "text/event-stream",
    body: event({ choices: [{ index: 0, delta: { role: "assistant", reasoning_content: "Let me think " } }] }) +
          event({ choices: [{ index: 0, delta: { reasoning_content: "about it." } }] }) +
          event({ choices: [{ index: 0, delta: { content: "The **answer**" } }] }) +
          event({ choices: [{ index: 0, delta: { content: " is 42." }, finish_reason: "stop" }],
                  timings: { predicted_n: 5, predicted_per_second: 123.4 } }) + "data: [DONE]\n\n",
  };
  await page.click("#new-chat");
  await check(await page.evaluate(() => document.querySelectorAll(".msg").length === 0), "New chat clears the conversation");
  await page.type("#input", "Why?");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /123\.4 tokens\/s/.test(document.querySelector(".msg.assistant .meta")?.textContent || ""), WAIT);
  const r = await page.evaluate(() => {
    const d = document.querySelector(".msg.assistant details.reasoning");
    return { open: d?.open, text: d?.querySelector(".text").textContent, body: document.querySelector(".msg.assistant .body").innerHTML };
  });
  await check(r.open === false && r.text === "Let me think about it.", "reasoning_content goes to a collapsed <details>");
  await check(r.body === "<p>The <strong>answer</strong> is 42.</p>", "delta.content is rendered as markdown");
  canned = { status: 400, contentType: "application/json",
             body: JSON.stringify({ error: { message: "the prompt is too long", type: "invalid_request_error" } }) };
  await page.type("#input", "Again");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector(".msg.assistant:last-of-type .error"), WAIT);
  await check(await page.$eval(".msg.assistant:last-of-type .error", (e) => e.textContent) === "HTTP 400: the prompt is too long",
              "an API error's message is shown");
  page.off("request", intercept);
  await page.setRequestInterception(false);

  // --- accessibility.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, textarea, button")].filter((e) =>
      !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim()).length);
  await check(unlabelled === 0, "every control has a label");
  await check(problems.length === 0, `no page errors or console errors${problems.length ? ": " + problems.join("; ") : ""}`);
}
