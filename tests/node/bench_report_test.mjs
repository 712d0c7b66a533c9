// The HTML report of `moetier bench --report DIR` in headless Chromium (puppeteer-core): it
// loads from a file:// URL with no console errors, no page errors and no request for anything
// but the page itself (the report must be self-contained), and shows its tables and charts.
// Usage: node bench_report_test.mjs REPORT.html N_RECORDS SERIES_NAME...   (CHROMIUM_PATH: the browser)
// Prints one line per check and exits non-zero on the first failure.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const [report, nRecords, ...seriesNames] = process.argv.slice(2);
if (!report || !nRecords) {
  console.error("usage: node bench_report_test.mjs REPORT.html N_RECORDS SERIES_NAME...");
  process.exit(2);
}
const profile = mkdtempSync(join(tmpdir(), "moetier-report-"));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
let failed = false;
function check(cond, what) {
  if (cond) {
    console.log(`ok: ${what}`);
  } else {
    console.error(`FAIL: ${what}`);
    failed = true;
  }
}
try {
  const page = await browser.newPage();
  const problems = [];
  const url = pathToFileURL(report).href;
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("request", (r) => {
    if (r.url() !== url) problems.push(`request for ${r.url()}`);
  });
  page.on("requestfailed", (r) => problems.push(`failed request: ${r.url()}`));
  const res = await page.goto(url, { waitUntil: "load", timeout: 60_000 });
  check(res && res.ok(), "the report loads");
  check((await page.title()) === "moetier bench report", "the title");
  const rows = await page.$$eval("#results tbody tr", (r) => r.length);
  check(rows === Number(nRecords), `${nRecords} result rows (got ${rows})`);
  const provenance = await page.$eval("#provenance", (e) => e.textContent);
  check(/sha256 [0-9a-f]{64}/.test(provenance), "the provenance cites the model's SHA-256");
  check((await page.$$("#chart svg")).length === 1, "one inline SVG chart");
  const names = await page.$$eval("#chart g.series", (g) => g.map((e) => e.getAttribute("data-name")));
  for (const name of seriesNames) check(names.includes(name), `the chart has the series "${name}"`);
  const box = await page.$eval("#chart svg", (e) => e.getBoundingClientRect().height);
  check(box > 200, "the chart is drawn with its size");
  check(problems.length === 0, `no console errors, page errors or outside requests${problems.length ? ": " + problems.join(" | ") : ""}`);
} catch (e) {
  check(false, `exception: ${e && e.stack ? e.stack : e}`);
}
await browser.close();
rmSync(profile, { recursive: true, force: true });
if (failed) process.exit(1);
console.log("all checks passed");
