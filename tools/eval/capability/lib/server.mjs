// `-m MODEL`: starts `moetier serve` on a free local port (--port 0; the server prints the
// port it got), waits until /health answers, and stops it at the end.
import { spawn } from "node:child_process";
import { request } from "./client.mjs";

export async function startServer({ binary, model, extraArgs = [], startupMs = 600_000, log }) {
  const args = ["serve", "-m", model, "--host", "127.0.0.1", "--port", "0", ...extraArgs];
  log(`starting: ${binary} ${args.join(" ")}`);
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  let exited = null;
  child.on("exit", (code, signal) => { exited = signal ? `signal ${signal}` : `status ${code}`; });
  child.on("error", (e) => { exited = `could not start: ${e.message}`; });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`moetier serve did not start within ${startupMs / 1000} s:\n${stderr.slice(-2000)}`)), startupMs);
    child.stderr.on("data", (d) => {
      stderr += d.toString();
      if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19));
      const m = stderr.match(/listening on http:\/\/[^:\s]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on("exit", () => { clearTimeout(timer); reject(new Error(`moetier serve exited (${exited}) before listening:\n${stderr.slice(-2000)}`)); });
    child.on("error", (e) => { clearTimeout(timer); reject(new Error(`could not start ${binary}: ${e.message}`)); });
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + startupMs;
  for (;;) {
    try {
      await request(url, "GET", "health", { timeoutMs: 5000 });
      break;
    } catch (e) {
      if (exited || Date.now() > deadline) throw new Error(`moetier serve at ${url} is not healthy: ${e.message}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  log(`server ready at ${url}`);
  return {
    url,
    args,
    log: () => stderr,
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      const done = new Promise((r) => child.once("exit", r));
      const timeout = new Promise((r) => setTimeout(r, 10_000, "timeout"));
      if ((await Promise.race([done, timeout])) === "timeout") child.kill("SIGKILL");
    },
  };
}
