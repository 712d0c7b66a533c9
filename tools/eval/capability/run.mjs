#!/usr/bin/env node
// capability-v1: `moetier eval capability` runs this script (so does `node run.mjs` by hand).
// It sends the five tasks of lib/tasks.mjs to an OpenAI-compatible server (moetier serve,
// llama-server, ...), renders the HTML/SVG/JS of the replies in headless Chromium, judges
// them by the rubric and writes results.jsonl, provenance.json, screenshots/, code/,
// summary.json and report.html into --out. Exit status: 0 when the suite ran (whatever the
// verdicts), 1 on a runtime failure, 2 on bad usage.
import { createHash } from "node:crypto";
import { appendFileSync, createReadStream, existsSync, mkdirSync, copyFileSync, statSync, writeFileSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chat, tryGet } from "./lib/client.mjs";
import { extractCode, stripThinking } from "./lib/extract.mjs";
import { launchBrowser, renderPage, webglAvailable, findChromium, DEFAULT_TIMES_MS } from "./lib/render.mjs";
import { startServer } from "./lib/server.mjs";
import { SUITE, TASKS, judge, overallVerdict, repairMessage } from "./lib/tasks.mjs";
import { writeReport } from "./lib/report.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));

const HELP = `usage: moetier eval capability (--url URL | -m MODEL.gguf [server flags]) [options]
       moetier eval capability --report-only DIR [--overrides FILE]

capability-v1: five tasks judged on what the model's code renders in headless Chromium
(an SVG cyclist animation, a WebGL scene with self-repair, a weather card UI) and on two
logic puzzles with known answers (a candy count; colour-blindness inheritance). Works with
any OpenAI-compatible server, so engines can be compared on the same items.

the server (one of):
  --url URL             an OpenAI-compatible server, e.g. http://127.0.0.1:8080 (llama-server, moetier serve)
  -m, --model FILE      start \`moetier serve -m FILE\` on a free local port for the run and stop it after;
                        every flag this script does not know goes to the server (-c 65536 -ngl 99 -ncmoe 40 ...)
  --moetier PATH        the moetier binary for -m (default: the one that ran this command)
  --api-key KEY         bearer token for the server (default: $OPENAI_API_KEY)

the run:
  --out DIR             where results go (default: capability-YYYYMMDD-HHMMSS in the current folder)
  --tasks LIST          comma-separated subset of: ${TASKS.map((t) => t.id).join(", ")}
  --repair-turns N      WebGL task: turns in which console errors are sent back to the model (default 3)
  --max-tokens N        max_tokens of every request (default 8192; thinking models need many)
  --temperature X       sent to the server (default: the server's own)
  --seed N              sent to the server (default: none)
  --extra JSON          more request fields, merged into every request, e.g.
                        '{"top_k":20,"top_p":0.95,"chat_template_kwargs":{"enable_thinking":false}}'
  --model-name NAME     the request's "model" field (default: the first id of GET /v1/models)
  --timeout S           seconds one request may take (default 1800)
  --chromium PATH       the browser (default: $MOETIER_CHROMIUM, /usr/bin/chromium, ...)
  --frames MS,MS,...    screenshot times after the load event (default ${DEFAULT_TIMES_MS.join(",")})
  --no-sha256           do not hash the model file for the provenance (-m only)

the report:
  --report-only DIR     re-render DIR/report.html and DIR/summary.json from DIR/results.jsonl,
                        applying DIR/overrides.json (the human verdicts saved from the report page)
  --overrides FILE      with --report-only: copy FILE (e.g. the downloaded overrides.json) to DIR first

outputs in DIR: report.html (open it in a browser), results.jsonl (one task a line: replies,
code, render measurements, rubric items), summary.json (verdicts after overrides),
provenance.json (model file, size, SHA-256, server, engine, flags, date), screenshots/*.png,
code/*.html (the pages as rendered). Needs Node.js >= 18, Chromium and the npm package
puppeteer-core (scripts/setup.sh; then npm ci in tools/eval/capability).`;

class UsageError extends Error {}

function parseArgs(argv) {
  const o = { repairTurns: 3, maxTokens: 8192, timeoutS: 1800, serverArgs: [], sha256: true };
  const need = (i, name) => {
    if (i + 1 >= argv.length) throw new UsageError(`${name} needs a value`);
    return argv[i + 1];
  };
  const int = (v, name, min) => {
    if (!/^-?\d+$/.test(v) || Number(v) < min) throw new UsageError(`${name} must be an integer >= ${min}, not '${v}'`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; ++i) {
    let a = argv[i];
    let inline = null;
    const eq = a.indexOf("=");
    if (a.startsWith("--") && eq > 0) { inline = a.slice(eq + 1); a = a.slice(0, eq); }
    const value = () => {
      if (inline !== null) return inline;
      const v = need(i, a);
      ++i;
      return v;
    };
    switch (a) {
      case "-h": case "--help": o.help = true; break;
      case "--url": o.url = value(); break;
      case "-m": case "--model": o.model = value(); break;
      case "--moetier": o.moetier = value(); break;
      case "--api-key": o.apiKey = value(); break;
      case "--out": o.out = value(); break;
      case "--tasks": o.tasks = value().split(",").map((s) => s.trim()).filter(Boolean); break;
      case "--repair-turns": o.repairTurns = int(value(), a, 0); break;
      case "--max-tokens": o.maxTokens = int(value(), a, 1); break;
      case "--temperature": {
        const v = value();
        if (!/^\d+(\.\d+)?$/.test(v)) throw new UsageError(`--temperature must be a number >= 0, not '${v}'`);
        o.temperature = Number(v);
        break;
      }
      case "--seed": o.seed = int(value(), a, -1); break;
      case "--extra": {
        const v = value();
        try { o.extra = JSON.parse(v); } catch { throw new UsageError(`--extra must be a JSON object, not '${v}'`); }
        if (!o.extra || typeof o.extra !== "object" || Array.isArray(o.extra)) throw new UsageError("--extra must be a JSON object");
        break;
      }
      case "--model-name": o.modelName = value(); break;
      case "--timeout": o.timeoutS = int(value(), a, 1); break;
      case "--chromium": o.chromium = value(); break;
      case "--frames": {
        const v = value();
        o.frames = v.split(",").map((x) => x.trim());
        if (o.frames.length < 2 || o.frames.some((x) => !/^\d+$/.test(x))) throw new UsageError(`--frames must be two or more times in ms, not '${v}'`);
        o.frames = o.frames.map(Number).sort((a, b) => a - b);
        break;
      }
      case "--no-sha256": o.sha256 = false; break;
      case "--report-only": o.reportOnly = value(); break;
      case "--overrides": o.overrides = value(); break;
      case "--engine-version": o.engineVersion = value(); break;  // given by `moetier eval`
      case "--": o.serverArgs.push(...argv.slice(i + 1)); i = argv.length; break;
      default:
        if (o.model !== undefined || argv.includes("-m") || argv.includes("--model")) {
          // A flag for the server; its value too when the next word is not a flag.
          o.serverArgs.push(argv[i]);
          if (inline === null && i + 1 < argv.length && !argv[i + 1].startsWith("-") && a.startsWith("-")) o.serverArgs.push(argv[++i]);
        } else {
          throw new UsageError(`unknown option '${argv[i]}' (see --help; server flags go with -m only)`);
        }
    }
  }
  if (o.help || o.reportOnly) return o;
  if (!o.url === !o.model) throw new UsageError("give either --url URL or -m MODEL.gguf");
  if (o.url && !/^https?:\/\//.test(o.url)) throw new UsageError(`--url must start with http:// or https://, not '${o.url}'`);
  if (o.model && !existsSync(o.model)) throw new UsageError(`model file not found: ${o.model}`);
  if (o.overrides) throw new UsageError("--overrides goes with --report-only");
  if (o.tasks) {
    for (const t of o.tasks) if (!TASKS.some((k) => k.id === t)) throw new UsageError(`unknown task '${t}' (tasks: ${TASKS.map((k) => k.id).join(", ")})`);
  }
  return o;
}

const log = (s) => process.stderr.write(`capability: ${s}\n`);

async function sha256File(file) {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 22 })) hash.update(chunk);
  return hash.digest("hex");
}

function stamp() {
  const d = new Date();
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

function moetierBinary(o) {
  if (o.moetier) return o.moetier;
  if (process.env.MOETIER_BINARY) return process.env.MOETIER_BINARY;
  const built = join(HERE, "..", "..", "..", "build", "moetier");
  return existsSync(built) ? built : "moetier";
}

// Saves the screenshots as files and keeps only their file names and numbers in the record.
function storeRender(out, taskId, turnIndex, r) {
  const shots = r.screenshots.map((s) => {
    const file = join("screenshots", `${taskId}-turn${turnIndex + 1}-${s.t}ms.png`);
    writeFileSync(join(out, file), s.png);
    return { t: s.t, file, nonBackground: s.nonBackground, stdev: s.stdev, background: s.background };
  });
  return { ...r, screenshots: shots };
}

async function runTask(task, ctx) {
  const { o, out, browser, env, params } = ctx;
  const messages = [{ role: "user", content: task.prompt }];
  const turns = [];
  const maxTurns = task.repair ? 1 + o.repairTurns : 1;
  let feedback = null;
  for (let k = 0; k < maxTurns; ++k) {
    const turn = { feedback };
    turns.push(turn);
    try {
      turn.reply = await chat(ctx.url, messages, params, { apiKey: o.apiKey, timeoutMs: o.timeoutS * 1000 });
    } catch (e) {
      turn.error = String(e.message || e);
      log(`${task.id}: turn ${k + 1}: ${turn.error}`);
      break;
    }
    log(`${task.id}: turn ${k + 1}: ${turn.reply.usage?.completion_tokens ?? "?"} tokens in ${turn.reply.seconds.toFixed(1)} s (${turn.reply.finish_reason})`);
    if (task.kind === "render") {
      const code = extractCode(turn.reply.content);
      if (code) {
        const file = join("code", `${task.id}-turn${k + 1}.html`);
        writeFileSync(join(out, file), code.code);
        turn.code = { text: code.code, kind: code.kind, source: code.source, complete: code.complete, file };
        turn.render = storeRender(out, task.id, k, await renderPage(browser, code.code, { times: ctx.times }));
      }
    }
    if (!task.repair || k + 1 === maxTurns) break;
    feedback = repairMessage(turn);
    if (!feedback) break;
    messages.push({ role: "assistant", content: stripThinking(turn.reply.content) });
    messages.push({ role: "user", content: feedback });
  }
  const items = judge(task, turns, env);
  return { suite: SUITE, task: task.id, title: task.title, kind: task.kind, prompt: task.prompt, expected: task.answer || null,
    turns, items, overall: overallVerdict(items) };
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`moetier eval capability: error: ${e.message}\n`);
    return 2;
  }
  if (o.help) {
    process.stdout.write(HELP + "\n");
    return 0;
  }
  if (o.reportOnly) {
    const dir = resolve(o.reportOnly);
    if (!existsSync(join(dir, "results.jsonl"))) {
      process.stderr.write(`moetier eval capability: error: ${join(dir, "results.jsonl")} not found\n`);
      return 2;
    }
    if (o.overrides) copyFileSync(o.overrides, join(dir, "overrides.json"));
    const verdicts = writeReport(dir);
    printSummary(verdicts, dir);
    return 0;
  }
  o.apiKey = o.apiKey || process.env.OPENAI_API_KEY || undefined;
  const tasks = o.tasks ? TASKS.filter((t) => o.tasks.includes(t.id)) : TASKS;
  const out = resolve(o.out || `capability-${stamp()}`);
  mkdirSync(join(out, "screenshots"), { recursive: true });
  mkdirSync(join(out, "code"), { recursive: true });
  rmSync(join(out, "results.jsonl"), { force: true });

  // The browser first, so a missing one stops the run before a server is started; only
  // the puzzles need none.
  const browser = tasks.some((t) => t.kind === "render") ? await launchBrowser({ chromium: o.chromium }) : null;
  let server = null;
  const cleanup = async () => {
    if (server) await server.stop().catch(() => {});
    server = null;
    if (browser) await browser.close().catch(() => {});
  };
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.once(sig, () => { log(`${sig}: stopping`); cleanup().finally(() => process.exit(130)); });
  }
  try {
    let modelInfo = null;
    if (o.model) {
      modelInfo = { file: basename(o.model), path: resolve(o.model), bytes: statSync(o.model).size, sha256: null };
      if (o.sha256) {
        log(`hashing ${o.model} (SHA-256; --no-sha256 skips it)`);
        modelInfo.sha256 = await sha256File(o.model);
      }
      server = await startServer({ binary: moetierBinary(o), model: o.model, extraArgs: o.serverArgs, log });
    }
    const url = server ? server.url : o.url.replace(/\/+$/, "");
    const models = await tryGet(url, "v1/models", o.apiKey);
    const props = await tryGet(url, "props", o.apiKey);
    const serverModel = models && Array.isArray(models.data) && models.data[0] ? models.data[0].id : null;
    const params = { model: o.modelName || serverModel || undefined, max_tokens: o.maxTokens, temperature: o.temperature, seed: o.seed, extra: o.extra };
    const webgl = browser ? await webglAvailable(browser) : null;
    const chromiumPath = findChromium(o.chromium);
    const provenance = {
      suite: SUITE,
      date: new Date().toISOString(),
      model: modelInfo,
      server_url: url,
      server_started: server ? { binary: moetierBinary(o), args: server.args } : null,
      server_model: serverModel,
      engine: (props && props.build_info) || o.engineVersion || null,
      runner: o.engineVersion || null,
      v1_models: models,
      props: props ? { ...props, chat_template: props.chat_template ? `${String(props.chat_template).length} characters` : undefined } : null,
      params: { model: params.model, max_tokens: o.maxTokens, temperature: o.temperature ?? null, seed: o.seed ?? null, extra: o.extra || null },
      repair_turns: o.repairTurns,
      tasks: tasks.map((t) => t.id),
      screenshot_times_ms: o.frames || DEFAULT_TIMES_MS,
      argv: process.argv.slice(2).map((a) => (a === o.apiKey ? "<api key>" : a)),
      chromium: browser ? `${await browser.version()} (${chromiumPath})` : null,
      webgl,
      node: process.version,
    };
    writeFileSync(join(out, "provenance.json"), JSON.stringify(provenance, null, 2) + "\n");
    log(`${tasks.length} tasks against ${url}${serverModel ? ` (${serverModel})` : ""}; results in ${out}`);
    const ctx = { o, out, browser, url, params, env: { webgl, repairTurns: o.repairTurns }, times: o.frames || DEFAULT_TIMES_MS };
    for (const task of tasks) {
      const record = await runTask(task, ctx);
      appendFileSync(join(out, "results.jsonl"), JSON.stringify(record) + "\n");
      log(`${task.id}: ${record.overall} (${record.items.map((i) => `${i.id} ${i.verdict}`).join(", ")})`);
    }
    await cleanup();
    const verdicts = writeReport(out);
    printSummary(verdicts, out);
    return 0;
  } catch (e) {
    await cleanup();
    process.stderr.write(`moetier eval capability: error: ${e.message || e}\n`);
    return 1;
  }
}

function printSummary(verdicts, dir) {
  const n = (v) => verdicts.filter((x) => x.overall === v).length;
  for (const v of verdicts) {
    const changed = v.overallOverride || v.items.some((i) => i.override) ? " (with human overrides)" : "";
    process.stdout.write(`${v.task.padEnd(18)} ${v.overall.padEnd(8)}${changed}\n`);
  }
  process.stdout.write(`${SUITE}: ${n("pass")} pass, ${n("partial")} partial, ${n("fail")} fail; report: ${join(dir, "report.html")}\n`);
}

main().then((rc) => process.exit(rc), (e) => {
  process.stderr.write(`moetier eval capability: error: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
