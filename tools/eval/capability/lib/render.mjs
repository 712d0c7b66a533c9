// Renders a model's HTML/SVG/JS in headless Chromium (puppeteer-core) with the network off,
// and measures what a person would look at: screenshots at several times after the load
// event, console and page errors, how much of the page is not background (the rendered-
// nothing detector), how much changed between frames (animation), WebGL contexts the page
// asked for, and frames per second (requestAnimationFrame frames that issued GL work).
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { decodePng, frameStats, frameDiff } from "./image.mjs";

export const DEFAULT_TIMES_MS = [500, 1200, 2000, 3000];
export const VIEWPORT = { width: 800, height: 600 };

// Below this share of non-background pixels a frame "shows nothing": a lone word of text in
// the corner is about 0.1% of 800×600; a small drawing is several percent.
export const BLANK_SHARE = 0.002;
// Below this it "shows almost nothing" (a heading, a loading message).
export const NEAR_BLANK_SHARE = 0.01;
// Two frames differ when more than this share of pixels changed (≈100 pixels of 800×600):
// a pedal turning by a few degrees is more, the caret blinking in an input is less.
export const CHANGED_SHARE = 0.0002;

export function findChromium(explicit) {
  const candidates = [explicit, process.env.MOETIER_CHROMIUM, process.env.CHROMIUM_PATH,
    "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].filter(Boolean);
  return candidates.find((p) => existsSync(p)) || null;
}

export async function loadPuppeteer() {
  try {
    return (await import("puppeteer-core")).default;
  } catch {
    throw new Error("the npm package puppeteer-core is missing: run `npm ci` in tools/eval/capability " +
      "(scripts/setup.sh installs Node.js, npm and Chromium)");
  }
}

// One browser for the whole run. SwiftShader is Chromium's software GL: with it WebGL works
// on machines without a GPU (slowly; the FPS it gives is the machine's CPU, not a GPU).
export async function launchBrowser({ chromium } = {}) {
  const puppeteer = await loadPuppeteer();
  const executablePath = findChromium(chromium);
  if (!executablePath) {
    throw new Error("Chromium not found: install it (Debian: apt-get install chromium, or scripts/setup.sh) " +
      "or pass --chromium PATH");
  }
  const profile = mkdtempSync(join(tmpdir(), "moetier-capability-"));
  const browser = await puppeteer.launch({
    executablePath,
    headless: true,
    userDataDir: profile,
    // A page in an endless loop never answers; a screenshot then fails after this long
    // instead of puppeteer's default 3 minutes.
    protocolTimeout: 20_000,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run", "--mute-audio",
      "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
      "--disable-background-timer-throttling", "--disable-renderer-backgrounding"],
  });
  const close = browser.close.bind(browser);
  browser.close = async () => {
    await close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  };
  return browser;
}

// Runs in the page before its own scripts: counts requestAnimationFrame frames (distinct
// timestamps) and those in which the page issued GL work, and records getContext calls.
const INSTRUMENT = `(() => {
  const s = { frames: 0, glFrames: 0, gl: 0, contexts: [] };
  Object.defineProperty(window, "__moetierProbe", { value: s, enumerable: false });
  const raf = window.requestAnimationFrame.bind(window);
  let lastTs = -1, glAtFrame = 0;
  window.requestAnimationFrame = (cb) => raf((ts) => {
    if (ts !== lastTs) { lastTs = ts; s.frames++; glAtFrame = s.gl; }
    try { return cb(ts); } finally {
      if (s.gl > glAtFrame) { s.glFrames++; glAtFrame = Infinity; }
    }
  });
  const getContext = HTMLCanvasElement.prototype.getContext;
  HTMLCanvasElement.prototype.getContext = function (type, ...rest) {
    const ctx = getContext.call(this, type, ...rest);
    if (!s.contexts.some((c) => c.type === type && c.ok === !!ctx)) s.contexts.push({ type: String(type), ok: !!ctx });
    return ctx;
  };
  for (const name of ["WebGLRenderingContext", "WebGL2RenderingContext"]) {
    const proto = window[name] && window[name].prototype;
    if (!proto) continue;
    for (const fn of ["drawArrays", "drawElements", "drawArraysInstanced", "drawElementsInstanced", "drawRangeElements", "clear"]) {
      const orig = proto[fn];
      if (typeof orig !== "function") continue;
      proto[fn] = function (...args) { s.gl++; return orig.apply(this, args); };
    }
  }
})();`;

// A bare <svg> (or an XML prologue) is put in a minimal HTML page, as a person would paste it.
export function asHtmlDocument(code) {
  const text = code.replace(/^\uFEFF/, "").replace(/^\s*<\?xml[^>]*\?>\s*/i, "");
  if (/^\s*<svg[\s>]/i.test(text)) {
    return `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>svg</title></head>` +
      `<body style="margin:0">\n${text}\n</body></html>\n`;
  }
  return text;
}

// Renders `html`. Returns a plain object (screenshots as PNG Buffers) that checks.mjs judges.
export async function renderPage(browser, html, { times = DEFAULT_TIMES_MS, loadTimeoutMs = 15000, viewport = VIEWPORT } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "moetier-page-"));
  const file = join(dir, "page.html");
  writeFileSync(file, asHtmlDocument(html));
  const pageUrl = pathToFileURL(file).href;
  const result = {
    consoleErrors: [], pageErrors: [], warnings: [], blocked: [], loadError: null,
    screenshots: [], diffs: [], contexts: [], fps: null, glFps: null, text: "",
  };
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  try {
    await page.setViewport(viewport);
    await page.setRequestInterception(true);
    page.on("request", (r) => {
      const url = r.url();
      if (url === pageUrl || url.startsWith("data:") || url.startsWith("blob:") || url === "about:blank") {
        return r.continue().catch(() => {});
      }
      result.blocked.push(url.slice(0, 300));
      return r.abort("blockedbyclient").catch(() => {});
    });
    page.on("console", (m) => {
      const text = m.text().slice(0, 2000);
      if (m.type() === "error") {
        // The abort above shows up as a console error too; it is reported as a blocked request.
        if (/net::ERR_BLOCKED_BY_CLIENT/.test(text)) return;
        result.consoleErrors.push(text);
      } else if (m.type() === "warn" || m.type() === "warning") {
        result.warnings.push(text);
      }
    });
    page.on("pageerror", (e) => result.pageErrors.push(String(e && e.message ? e.message : e).slice(0, 2000)));
    page.on("dialog", (d) => d.dismiss().catch(() => {}));
    await page.evaluateOnNewDocument(INSTRUMENT);
    try {
      await page.goto(pageUrl, { waitUntil: "load", timeout: loadTimeoutMs });
    } catch (e) {
      result.loadError = String(e.message || e).split("\n")[0];
    }
    const t0 = Date.now();
    let firstProbe = null, lastProbe = null;
    const HUNG = "hung";
    const probe = () => Promise.race([
      page.evaluate(() => {
        const s = window.__moetierProbe;
        return s ? { frames: s.frames, glFrames: s.glFrames, contexts: s.contexts, now: performance.now() } : null;
      }).catch(() => null),
      new Promise((r) => setTimeout(r, 5000, HUNG)),
    ]);
    let previous = null;
    for (const t of times) {
      const wait = t0 + t - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const p = await probe();
      if (p === HUNG) {
        result.pageErrors.push(`the page did not respond at ${t} ms (an endless loop?)`);
        break;
      }
      if (p) { if (!firstProbe) firstProbe = p; lastProbe = p; }
      let png = null;
      try {
        const shot = page.screenshot({ type: "png" });
        shot.catch(() => {});  // when the race below gives up first
        png = Buffer.from(await Promise.race([shot,
          new Promise((_, reject) => setTimeout(reject, 10_000, new Error("no screenshot within 10 s")))]));
      } catch (e) {
        // A hung page (an endless loop) times out here; later frames would too.
        result.pageErrors.push(`the page did not respond (screenshot at ${t} ms failed: ${String(e.message || e).split("\n")[0]})`);
        break;
      }
      const img = decodePng(png);
      const stats = frameStats(img);
      result.screenshots.push({ t, png, ...stats });
      if (previous) result.diffs.push({ from: previous.t, to: t, changed: frameDiff(previous.img, img) });
      previous = { t, img };
    }
    if (lastProbe) result.contexts = lastProbe.contexts;
    if (firstProbe && lastProbe && lastProbe.now > firstProbe.now) {
      const seconds = (lastProbe.now - firstProbe.now) / 1000;
      result.fps = (lastProbe.frames - firstProbe.frames) / seconds;
      result.glFps = (lastProbe.glFrames - firstProbe.glFrames) / seconds;
      result.fpsWindowS = seconds;
    }
    result.text = await Promise.race([
      page.evaluate(() => (document.body ? document.body.innerText : "")).catch(() => ""),
      new Promise((r) => setTimeout(r, 5000, "")),
    ]);
    result.text = (result.text || "").slice(0, 4000);
  } finally {
    await context.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

// Whether this Chromium gives pages a WebGL context at all (SwiftShader may be missing).
export async function webglAvailable(browser) {
  const context = await browser.createBrowserContext();
  try {
    const page = await context.newPage();
    return await page.evaluate(() => {
      const c = document.createElement("canvas");
      const gl = c.getContext("webgl2") || c.getContext("webgl");
      if (!gl) return { ok: false, reason: "getContext('webgl') returned null in this Chromium" };
      const dbg = gl.getExtension("WEBGL_debug_renderer_info");
      const renderer = dbg ? gl.getParameter(dbg.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
      return { ok: true, renderer: String(renderer) };
    });
  } catch (e) {
    return { ok: false, reason: String(e.message || e) };
  } finally {
    await context.close().catch(() => {});
  }
}
