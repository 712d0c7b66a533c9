// The HTML report: one self-contained file (screenshots as data: URIs, no external request)
// with the provenance, each task's prompt, every turn's screenshots, errors and code, and the
// rubric with the automatic verdicts. Each verdict has an override control; the page offers
// the overrides as overrides.json, and `--report-only DIR` re-renders the report with
// DIR/overrides.json applied (the human verdict is shown beside the automatic one).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SUITE, overallVerdict } from "./tasks.mjs";

export const VERDICTS = ["pass", "partial", "fail", "skipped"];

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

export function readResults(dir) {
  const text = readFileSync(join(dir, "results.jsonl"), "utf8");
  return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

// overrides.json: { suite, overrides: { TASK: { ITEM | "overall": { verdict, note } } } }.
export function readOverrides(file) {
  if (!existsSync(file)) return {};
  const json = JSON.parse(readFileSync(file, "utf8"));
  const o = json && typeof json === "object" ? (json.overrides || {}) : {};
  for (const [task, items] of Object.entries(o)) {
    for (const [item, v] of Object.entries(items || {})) {
      if (!v || !VERDICTS.includes(v.verdict)) throw new Error(`${file}: ${task}/${item}: verdict must be one of ${VERDICTS.join(", ")}`);
    }
  }
  return o;
}

// The verdicts after the overrides: per task { overall, auto, items: [{ id, auto, verdict, note, by }] }.
export function applyOverrides(results, overrides) {
  return results.map((r) => {
    const o = overrides[r.task] || {};
    const items = r.items.map((i) => ({ ...i, auto: i.verdict, verdict: o[i.id] ? o[i.id].verdict : i.verdict,
      override: o[i.id] || null }));
    const computed = overallVerdict(items);
    return { task: r.task, title: r.title, auto: r.overall, computed, overall: o.overall ? o.overall.verdict : computed,
      overallOverride: o.overall || null, items };
  });
}

function badge(v) {
  return `<span class="v v-${esc(v)}">${esc(v)}</span>`;
}

function dataUri(dir, file) {
  const p = join(dir, file);
  if (!existsSync(p)) return null;
  return `data:image/png;base64,${readFileSync(p).toString("base64")}`;
}

function provenanceTable(p) {
  const rows = [
    ["suite", p.suite], ["date", p.date], ["model file", p.model ? `${p.model.file} (${p.model.bytes} bytes)` : "— (given by the server)"],
    ["model SHA-256", p.model ? p.model.sha256 || "not computed (--no-sha256)" : "—"],
    ["server", p.server_url], ["server model id", p.server_model], ["engine", p.engine],
    ["request parameters", JSON.stringify(p.params)], ["repair turns", p.repair_turns], ["command line", p.argv && p.argv.join(" ")],
    ["chromium", p.chromium], ["WebGL in chromium", p.webgl ? (p.webgl.ok ? p.webgl.renderer : `unavailable: ${p.webgl.reason}`) : "—"],
    ["node", p.node],
  ];
  return `<table class="prov">${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v ?? "—")}</td></tr>`).join("")}</table>`;
}

function turnHtml(dir, task, turn, i) {
  const parts = [];
  const head = turn.reply
    ? `${turn.reply.usage?.completion_tokens ?? "?"} tokens in ${turn.reply.seconds.toFixed(1)} s, finish_reason ${esc(turn.reply.finish_reason)}`
    : `request failed: ${esc(turn.error)}`;
  parts.push(`<h4>Turn ${i + 1} <small>${head}</small></h4>`);
  if (turn.feedback) parts.push(`<details><summary>Message sent to the model before this turn</summary><pre>${esc(turn.feedback)}</pre></details>`);
  const r = turn.render;
  if (r) {
    const shots = r.screenshots.map((s) => {
      const uri = dataUri(dir, s.file);
      return `<figure>${uri ? `<img alt="${esc(task.task)} turn ${i + 1} at ${s.t} ms" src="${uri}">` : "<div class=missing>missing</div>"}` +
        `<figcaption>${(s.t / 1000).toFixed(1)} s · ${(100 * s.nonBackground).toFixed(2)}% non-background</figcaption></figure>`;
    }).join("");
    parts.push(`<div class="shots">${shots}</div>`);
    const facts = [];
    if (r.diffs.length) facts.push(`frame changes: ${r.diffs.map((d) => `${(100 * d.changed).toFixed(2)}%`).join(", ")}`);
    if (r.contexts.length) facts.push(`contexts: ${r.contexts.map((c) => `${c.type}${c.ok ? "" : " (null)"}`).join(", ")}`);
    if (r.fps > 0 || r.contexts.length) facts.push(`FPS: ${r.fps.toFixed(1)} animation frames/s, ${(r.glFps || 0).toFixed(1)} with WebGL drawing`);
    if (facts.length) parts.push(`<p class="facts">${esc(facts.join(" · "))}</p>`);
    const errors = [...r.pageErrors.map((e) => `uncaught: ${e}`), ...r.consoleErrors.map((e) => `console: ${e}`),
      ...r.blocked.map((u) => `blocked request: ${u}`), ...(r.loadError ? [`load: ${r.loadError}`] : [])];
    parts.push(errors.length ? `<div class="errors"><b>Errors (${errors.length})</b><ul>${errors.map((e) => `<li>${esc(e)}</li>`).join("")}</ul></div>`
      : `<p class="facts">no console errors</p>`);
  }
  if (turn.code) {
    parts.push(`<details${task.kind === "render" ? "" : " open"}><summary>The model's code (${esc(turn.code.kind)}, ${turn.code.text.length} characters, ` +
      `from ${esc(turn.code.source)}${turn.code.complete ? "" : ", cut off"}${turn.code.file ? `; saved as ${esc(turn.code.file)}` : ""})</summary>` +
      `<pre class="code">${esc(turn.code.text)}</pre></details>`);
  }
  if (turn.reply) {
    parts.push(`<details${task.kind === "puzzle" ? " open" : ""}><summary>The reply (${turn.reply.content.length} characters)</summary>` +
      `<pre class="reply">${esc(turn.reply.content)}</pre></details>`);
    if (turn.reply.reasoning) {
      parts.push(`<details><summary>Reasoning (${turn.reply.reasoning.length} characters)</summary><pre class="reply">${esc(turn.reply.reasoning)}</pre></details>`);
    }
  }
  return `<div class="turn">${parts.join("\n")}</div>`;
}

function rubricTable(task, verdict) {
  const options = (sel) => [`<option value="">auto</option>`, ...VERDICTS.map((v) => `<option value="${v}"${sel === v ? " selected" : ""}>${v}</option>`)].join("");
  const rows = verdict.items.map((i) => `<tr data-task="${esc(task.task)}" data-item="${esc(i.id)}">` +
    `<td>${esc(i.label)}${i.critical ? ' <span class="crit" title="a fail here fails the task">critical</span>' : ""}</td>` +
    `<td>${badge(i.auto)}</td><td class="note">${esc(i.note)}</td>` +
    `<td><label><span class="vh">override ${esc(i.id)}</span><select class="ov">${options(i.override?.verdict)}</select></label> ` +
    `<label><span class="vh">note for ${esc(i.id)}</span><input class="ov-note" placeholder="why" value="${esc(i.override?.note || "")}"></label></td>` +
    `<td class="eff">${badge(i.verdict)}</td></tr>`).join("");
  const overall = `<tr class="overall" data-task="${esc(task.task)}" data-item="overall"><td><b>Task verdict</b> (fail if a critical item fails; pass if all pass; else partial)</td>` +
    `<td>${badge(verdict.auto)}</td><td class="note"></td>` +
    `<td><label><span class="vh">override the task verdict</span><select class="ov">${options(verdict.overallOverride?.verdict)}</select></label> ` +
    `<label><span class="vh">note for the task verdict</span><input class="ov-note" placeholder="why" value="${esc(verdict.overallOverride?.note || "")}"></label></td>` +
    `<td class="eff">${badge(verdict.overall)}</td></tr>`;
  return `<table class="rubric"><thead><tr><th>rubric item</th><th>automatic</th><th>evidence</th><th>human override</th><th>verdict</th></tr></thead>` +
    `<tbody>${rows}${overall}</tbody></table>`;
}

const CSS = `
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px 24px;color:#1d2330;background:#fafbfc}
h1{margin:.2em 0}h2{margin-top:2em;border-bottom:2px solid #dde3ea;padding-bottom:4px}h4{margin:1em 0 .4em}h4 small{font-weight:normal;color:#667}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef2f6}.prov th{width:180px}.prov td{word-break:break-all}
.v{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
.v-pass{background:#2e8540}.v-partial{background:#c77700}.v-fail{background:#c62828}.v-skipped{background:#7a8591}
.crit{font-size:11px;color:#c62828;border:1px solid #c62828;border-radius:4px;padding:0 3px}
.note{color:#444;font-size:13px;max-width:420px;word-break:break-word}
.shots{display:flex;gap:8px;flex-wrap:wrap}figure{margin:0}figure img{width:270px;border:1px solid #ccd;background:#fff;display:block}
figcaption{font-size:12px;color:#556}.errors{background:#fff1f0;border:1px solid #f3c1bd;padding:4px 10px;margin:.5em 0}
.errors ul{margin:.2em 0;padding-left:1.2em}.facts{color:#445;font-size:13px;margin:.3em 0}
pre{background:#f1f3f6;border:1px solid #dde3ea;padding:8px;overflow:auto;max-height:480px;white-space:pre-wrap;word-break:break-word;font-size:12px}
.turn{border-left:3px solid #dde3ea;padding-left:12px;margin:1em 0}.ov-note{width:130px}td:nth-child(4){white-space:nowrap}
.vh{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
#ov-bar{position:sticky;top:0;background:#fffbe6;border:1px solid #f0d98c;padding:6px 10px;margin:1em 0;z-index:1}
.summary td:first-child{white-space:nowrap}.missing{width:270px;height:200px;background:#eee}
`;

// The page's script: keeps the effective verdicts in step with the override controls and
// offers overrides.json for download. overallVerdict is the same function as in tasks.mjs.
function pageScript() {
  return `
const overallVerdict = ${overallVerdict.toString()};
const data = JSON.parse(document.getElementById("data").textContent);
const badge = (v) => '<span class="v v-' + v + '">' + v + '</span>';
function collect() {
  const out = {};
  for (const row of document.querySelectorAll("tr[data-item]")) {
    const v = row.querySelector("select.ov").value;
    if (!v) continue;
    const t = row.dataset.task;
    (out[t] = out[t] || {})[row.dataset.item] = { verdict: v, note: row.querySelector("input.ov-note").value };
  }
  return out;
}
function refresh() {
  const ov = collect();
  let n = 0;
  for (const t of data.tasks) {
    const o = ov[t.task] || {};
    const items = t.items.map((i) => ({ critical: i.critical, verdict: o[i.id] ? o[i.id].verdict : i.auto }));
    for (const i of t.items) {
      const row = document.querySelector('tr[data-task="' + t.task + '"][data-item="' + i.id + '"]');
      row.querySelector(".eff").innerHTML = badge(o[i.id] ? o[i.id].verdict : i.auto);
    }
    const overall = o.overall ? o.overall.verdict : overallVerdict(items);
    document.querySelector('tr[data-task="' + t.task + '"][data-item="overall"] .eff').innerHTML = badge(overall);
    document.querySelector('#sum-' + t.task).innerHTML = badge(overall);
    n += Object.keys(o).length;
  }
  document.getElementById("ov-count").textContent = n + (n === 1 ? " override" : " overrides");
  return ov;
}
document.addEventListener("change", (e) => { if (e.target.matches("select.ov, input.ov-note")) refresh(); });
document.getElementById("ov-save").addEventListener("click", () => {
  const json = JSON.stringify({ suite: data.suite, saved: new Date().toISOString(), overrides: refresh() }, null, 2) + "\\n";
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([json], { type: "application/json" }));
  a.download = "overrides.json";
  document.body.appendChild(a);
  a.click();
  a.remove();
});
refresh();
`;
}

export function buildReport(dir, results, provenance, overrides) {
  const verdicts = applyOverrides(results, overrides);
  const counts = { pass: 0, partial: 0, fail: 0, skipped: 0 };
  for (const v of verdicts) counts[v.overall]++;
  const summary = `<table class="summary"><thead><tr><th>task</th><th>verdict</th><th>automatic</th><th>items (pass / partial / fail)</th></tr></thead><tbody>` +
    verdicts.map((v) => {
      const c = (k) => v.items.filter((i) => i.verdict === k).length;
      return `<tr><td><a href="#${esc(v.task)}">${esc(v.title)}</a></td><td id="sum-${esc(v.task)}">${badge(v.overall)}</td><td>${badge(v.auto)}</td>` +
        `<td>${c("pass")} / ${c("partial")} / ${c("fail")}${c("skipped") ? ` (${c("skipped")} skipped)` : ""}</td></tr>`;
    }).join("") + `</tbody></table>`;
  const sections = results.map((r, k) => `<section id="${esc(r.task)}"><h2>${esc(r.title)} ${badge(verdicts[k].overall)}</h2>` +
    `<details><summary>Prompt</summary><pre>${esc(r.prompt)}</pre></details>` +
    (r.expected ? `<p>Expected: ${esc(r.expected)}</p>` : "") +
    rubricTable(r, verdicts[k]) + r.turns.map((t, i) => turnHtml(dir, r, t, i)).join("\n") + `</section>`).join("\n");
  const data = { suite: SUITE, tasks: verdicts.map((v) => ({ task: v.task, items: v.items.map((i) => ({ id: i.id, auto: i.auto, critical: i.critical })) })) };
  const model = provenance.model ? provenance.model.file : provenance.server_model || provenance.server_url;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(SUITE)}: ${esc(model)}</title><style>${CSS}</style></head>
<body>
<h1>${esc(SUITE)} — ${esc(model)}</h1>
<p>${counts.pass} pass, ${counts.partial} partial, ${counts.fail} fail${counts.skipped ? `, ${counts.skipped} skipped` : ""} · ${esc(provenance.date)}${provenance.engine ? ` · ${esc(provenance.engine)}` : ""}</p>
${summary}
<div id="ov-bar"><b id="ov-count">0 overrides</b> · change a verdict in a rubric table, then
<button id="ov-save" type="button">Download overrides.json</button> and save it as <code>${esc(join(dir, "overrides.json"))}</code>;
<code>moetier eval capability --report-only ${esc(dir)}</code> re-renders this page with it (the override and its note are kept beside the automatic verdict).</div>
<h2>Provenance</h2>
${provenanceTable(provenance)}
${sections}
<script type="application/json" id="data">${JSON.stringify(data).replace(/</g, "\\u003c")}</script>
<script>${pageScript()}</script>
</body></html>
`;
}

// Writes DIR/report.html and DIR/summary.json (the verdicts after overrides) from
// DIR/results.jsonl, DIR/provenance.json and DIR/overrides.json (if present).
export function writeReport(dir) {
  const results = readResults(dir);
  const provenance = JSON.parse(readFileSync(join(dir, "provenance.json"), "utf8"));
  const overrides = readOverrides(join(dir, "overrides.json"));
  writeFileSync(join(dir, "report.html"), buildReport(dir, results, provenance, overrides));
  const verdicts = applyOverrides(results, overrides);
  const summary = {
    suite: SUITE, model: provenance.model || null, server_model: provenance.server_model, engine: provenance.engine,
    date: provenance.date,
    tasks: verdicts.map((v) => ({ task: v.task, verdict: v.overall, automatic: v.auto, overridden: !!v.overallOverride || v.items.some((i) => i.override),
      items: Object.fromEntries(v.items.map((i) => [i.id, i.verdict])) })),
  };
  writeFileSync(join(dir, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
  return verdicts;
}
