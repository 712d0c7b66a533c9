// Shared by the pipeline and end-to-end tests: running a command, and opening a report in
// headless Chromium with its console errors collected.
import { spawn } from "node:child_process";
import { pathToFileURL } from "node:url";

export function runCommand(cmd, args, { timeoutMs = 120_000, env } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.on("close", (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
    child.on("error", (e) => { clearTimeout(timer); resolve({ code: -1, signal: null, stdout, stderr: stderr + e.message }); });
  });
}

// Opens DIR/report.html; returns { page, context, errors } (errors: console errors and
// uncaught exceptions). downloadPath: where the page's downloads go.
export async function openReport(browser, file, { downloadPath } = {}) {
  const context = await browser.createBrowserContext(downloadPath ? { downloadBehavior: { policy: "allow", downloadPath } } : {});
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => errors.push(`uncaught: ${e.message}`));
  page.on("requestfailed", (r) => errors.push(`request failed: ${r.url().slice(0, 100)}`));
  await page.setViewport({ width: 1280, height: 1000 });
  await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
  return { page, context, errors };
}
