// End to end: `moetier eval capability -m MODEL` on a tiny random-weight reference model.
// The replies are noise, so the verdicts are whatever they are: the harness must start the
// server, run every task (the WebGL one through all its repair turns), stop the server, and
// write a report that opens in headless Chromium without errors.
// Needs MOETIER_BINARY (ctest sets it) and MOETIER_REF_DIR; skipped without them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCommand, openReport } from "./helpers.mjs";
import { launchBrowser } from "../lib/render.mjs";

const binary = process.env.MOETIER_BINARY;
const model = process.env.MOETIER_REF_DIR && join(process.env.MOETIER_REF_DIR, "models", "qwen35moe-tiny-mixed.gguf");
const skip = !binary ? "MOETIER_BINARY not set" : !model || !existsSync(model) ? "MOETIER_REF_DIR/models/qwen35moe-tiny-mixed.gguf not found" : false;

test("moetier eval capability -m tiny model: finishes and writes a report that opens cleanly", { skip }, async () => {
  assert.ok(existsSync(binary), `${binary} does not exist (build the moetier target)`);
  const out = mkdtempSync(join(tmpdir(), "moetier-capability-e2e-"));
  try {
    const r = await runCommand(binary, ["eval", "capability", "-m", model, "--out", out, "--max-tokens", "48",
      "--seed", "1", "--temperature", "0.8", "--frames", "200,500", "-t", "1", "-c", "2048"], { timeoutMs: 120_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /capability-v1: \d pass, \d partial, \d fail; report: /);
    assert.match(r.stderr, /starting: .*serve -m .*qwen35moe-tiny-mixed\.gguf --host 127\.0\.0\.1 --port 0 -t 1 -c 2048/);

    const results = readFileSync(join(out, "results.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    assert.deepEqual(results.map((x) => x.task), ["svg-cyclist", "webgl-scene", "weather-card", "candy-count", "colour-blindness"]);
    for (const x of results) {
      assert.ok(["pass", "partial", "fail"].includes(x.overall), x.task);
      assert.ok(x.turns.every((t) => t.reply && !t.error), `${x.task}: ${JSON.stringify(x.turns.map((t) => t.error))}`);
    }
    const prov = JSON.parse(readFileSync(join(out, "provenance.json"), "utf8"));
    assert.equal(prov.model.file, "qwen35moe-tiny-mixed.gguf");
    assert.match(prov.model.sha256, /^[0-9a-f]{64}$/);
    assert.match(prov.engine, /^moetier /);
    assert.equal(prov.v1_models.data[0].id.length > 0, true);

    const browser = await launchBrowser();
    try {
      const { page, context, errors } = await openReport(browser, join(out, "report.html"));
      const title = await page.title();
      await context.close();
      assert.match(title, /capability-v1: qwen35moe-tiny-mixed\.gguf/);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
