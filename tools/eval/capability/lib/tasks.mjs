// capability-v1: the five tasks, their prompts and their rubrics. Each rubric item is judged
// automatically (pass / partial / fail, or skipped with a reason) from the reply and, for
// the rendered tasks, from what headless Chromium showed; a person can override any verdict
// in the report (report.mjs). The task texts were written for this suite.
import { BLANK_SHARE, NEAR_BLANK_SHARE, CHANGED_SHARE } from "./render.mjs";
import { checkCandy, checkFather, mentionsXLinkage } from "./puzzles.mjs";
import { finalNumber } from "./extract.mjs";

export const SUITE = "capability-v1";

const SELF_CONTAINED = "Everything must be in that one file: no external scripts, stylesheets, fonts, images " +
  "or network requests of any kind.";

export const TASKS = [
  {
    id: "svg-cyclist",
    title: "SVG animation: a cyclist",
    kind: "render",
    prompt:
      "Draw an animated side view of a person riding a bicycle, in SVG.\n" +
      "- The bicycle has two wheels that turn, a frame, handlebars, a saddle and a crank with two pedals that go round.\n" +
      "- The rider sits on the saddle with the hands on the handlebars.\n" +
      "- Each leg is made of a thigh and a shin joined at a knee. While the pedals turn, the feet stay on the pedals, " +
      "so each knee bends and straightens; a leg must not swing as one stiff piece.\n" +
      "- The animation loops smoothly for ever.\n" +
      "Use inline SVG animated with SMIL, CSS or plain JavaScript. " + SELF_CONTAINED + "\n" +
      "Reply with one complete HTML file in a single ```html code block.",
    rubric: [
      { id: "code", label: "The reply contains a complete HTML/SVG page", critical: true },
      { id: "renders", label: "The page shows something (not blank or near-blank)", critical: true },
      { id: "no-errors", label: "No console errors, uncaught exceptions or blocked network requests" },
      { id: "animates", label: "The picture changes between frames and is still moving at 3 s", critical: true },
      { id: "knees", label: "Legs have knee joints: thigh and shin move separately (not rigid rotation)" },
      { id: "complete", label: "The reply ended by itself (not cut off at max_tokens)" },
    ],
  },
  {
    id: "webgl-scene",
    title: "WebGL scene with self-repair",
    kind: "render",
    repair: true,
    prompt:
      "Write a single HTML file that renders a 3D scene with raw WebGL (no libraries):\n" +
      "- a full-window canvas that follows the window size;\n" +
      "- a cube that rotates slowly, lit by one directional light, so that its faces have different brightness;\n" +
      "- a checkerboard floor under the cube, seen through a perspective camera from slightly above;\n" +
      "- an animation loop with requestAnimationFrame;\n" +
      "- a small text overlay in the bottom-left corner showing the current frames per second.\n" +
      SELF_CONTAINED + "\n" +
      "Reply with the complete file in a single ```html code block.",
    rubric: [
      { id: "code", label: "The reply contains a complete HTML page", critical: true },
      { id: "webgl", label: "The page creates a WebGL context", critical: true },
      { id: "renders", label: "The page shows something (not blank or near-blank)", critical: true },
      { id: "no-errors", label: "No console errors, uncaught exceptions or blocked requests (last turn)", critical: true },
      { id: "repair", label: "Self-repair: errors fed back to the model were fixed within the allowed turns" },
      { id: "animates", label: "The picture changes between frames" },
      { id: "fps", label: "Frames per second in headless Chromium (software GL): ≥ 20 pass, ≥ 5 partial" },
      { id: "fps-overlay", label: "An FPS overlay is shown as text" },
      { id: "complete", label: "The last reply ended by itself (not cut off at max_tokens)" },
    ],
  },
  {
    id: "weather-card",
    title: "UI component: a weather card",
    kind: "render",
    prompt:
      "Build a weather card UI component as one HTML file (HTML and CSS, plain JavaScript only if needed).\n" +
      "The card shows:\n" +
      "- the city \"Lisbon\" and the current temperature \"21°C\";\n" +
      "- the condition \"Partly cloudy\" with an icon drawn in CSS or inline SVG, gently animated (drifting cloud, pulsing sun);\n" +
      "- humidity 64% and wind 12 km/h;\n" +
      "- a three-day forecast: Mon 23°/15°, Tue 19°/13°, Wed 22°/14°, each with a small icon.\n" +
      "Give the card rounded corners, a soft gradient background and a short entrance animation, centred on the page. " +
      SELF_CONTAINED + "\n" +
      "Reply with the complete file in a single ```html code block.",
    rubric: [
      { id: "code", label: "The reply contains a complete HTML page", critical: true },
      { id: "renders", label: "The page shows something (not blank or near-blank)", critical: true },
      { id: "content", label: "The card's text is on the page: Lisbon, 21°, Partly cloudy, 64%, 12 km/h, Mon, Tue, Wed", critical: true },
      { id: "no-errors", label: "No console errors, uncaught exceptions or blocked network requests" },
      { id: "animates", label: "Something is still animated at 3 s (the weather icon)" },
      { id: "complete", label: "The reply ended by itself (not cut off at max_tokens)" },
    ],
  },
  {
    id: "candy-count",
    title: "Logic puzzle: the candy jar",
    kind: "puzzle",
    prompt:
      "A jar holds some candies. Ana takes one third of them. Then Ben eats 2 of the candies that are left. " +
      "Then Carla takes half of what remains, and after that exactly 6 candies are left in the jar. " +
      "How many candies were in the jar at the start?\n" +
      "Work it out step by step, then end your reply with a line of the form `Answer: <number>`.",
    answer: "21",
    rubric: [
      { id: "answer", label: "The final answer is 21", critical: true },
      { id: "answer-line", label: "The reply ends with an explicit \"Answer:\" line" },
      { id: "complete", label: "The reply ended by itself (not cut off at max_tokens)" },
    ],
  },
  {
    id: "colour-blindness",
    title: "Logic puzzle: colour-blindness inheritance",
    kind: "puzzle",
    prompt:
      "Red-green colour blindness is inherited as an X-linked recessive trait. A woman with normal colour vision and " +
      "her husband have two biological children: a daughter who is red-green colour-blind and a son with normal " +
      "colour vision. There are no new mutations and nothing else affects anyone's colour vision.\n" +
      "What can you conclude about the father's colour vision? Explain your reasoning briefly, then end your reply " +
      "with a line of the form `Answer: <your conclusion>`.",
    answer: "The father is red-green colour-blind (the mother is a carrier).",
    rubric: [
      { id: "answer", label: "The conclusion: the father is red-green colour-blind", critical: true },
      { id: "mechanism", label: "The reasoning names the mechanism (X chromosome / X-linked / carrier)" },
      { id: "complete", label: "The reply ended by itself (not cut off at max_tokens)" },
    ],
  },
];

export function taskById(id) {
  return TASKS.find((t) => t.id === id);
}

const pct = (x) => `${(100 * x).toFixed(2)}%`;

function completeItem(turn) {
  if (!turn || !turn.reply) return { verdict: "fail", note: turn && turn.error ? `request failed: ${turn.error}` : "no reply" };
  const r = turn.reply;
  if (r.finish_reason === "length") {
    return { verdict: "fail", note: `cut off at max_tokens (${r.usage?.completion_tokens ?? "?"} tokens, ${r.content.length + (r.reasoning || "").length} characters)` };
  }
  return { verdict: "pass", note: `finish_reason ${r.finish_reason ?? "?"}, ${r.usage?.completion_tokens ?? "?"} tokens` };
}

function codeItem(turn) {
  if (!turn || !turn.reply) return { verdict: "fail", note: turn && turn.error ? `request failed: ${turn.error}` : "no reply" };
  if (!turn.code) return { verdict: "fail", note: "no HTML or SVG code in the reply" };
  if (!turn.code.complete) return { verdict: "partial", note: `the code is cut off (${turn.code.source}, ${turn.code.text.length} characters)` };
  return { verdict: "pass", note: `${turn.code.kind} from ${turn.code.source}, ${turn.code.text.length} characters` };
}

function rendersItem(r) {
  if (!r) return { verdict: "fail", note: "nothing to render" };
  if (!r.screenshots.length) return { verdict: "fail", note: r.loadError || "no screenshot could be taken" };
  const shares = r.screenshots.map((s) => s.nonBackground);
  const max = Math.max(...shares), last = shares[shares.length - 1];
  const frames = r.screenshots.map((s) => `${(s.t / 1000).toFixed(1)} s: ${pct(s.nonBackground)}`).join(", ");
  const note = `non-background pixels ${frames}`;
  if (max < BLANK_SHARE) return { verdict: "fail", note: `rendered nothing (${note})` };
  if (last < BLANK_SHARE) return { verdict: "partial", note: `the content disappears (${note})` };
  if (max < NEAR_BLANK_SHARE) return { verdict: "partial", note: `almost nothing is shown (${note})` };
  return { verdict: "pass", note };
}

function errorsOf(r) {
  if (!r) return [];
  return [...r.pageErrors.map((e) => `uncaught: ${e}`), ...r.consoleErrors.map((e) => `console: ${e}`),
    ...r.blocked.map((u) => `blocked request: ${u}`), ...(r.loadError ? [`load: ${r.loadError}`] : [])];
}

function noErrorsItem(r) {
  if (!r) return { verdict: "fail", note: "nothing was rendered" };
  const errors = errorsOf(r);
  if (!errors.length) return { verdict: "pass", note: "none" };
  return { verdict: "fail", note: `${errors.length}: ${errors.slice(0, 3).join(" | ").slice(0, 400)}` };
}

function animatesItem(r) {
  if (!r || r.diffs.length === 0) return { verdict: "fail", note: "fewer than two frames" };
  const moving = r.diffs.map((d) => d.changed > CHANGED_SHARE);
  const note = "changed pixels " + r.diffs.map((d) => `${(d.from / 1000).toFixed(1)}→${(d.to / 1000).toFixed(1)} s: ${pct(d.changed)}`).join(", ");
  const n = moving.filter(Boolean).length;
  if (n === 0) return { verdict: "fail", note: `static (${note})` };
  if (!moving[moving.length - 1]) return { verdict: "partial", note: `the animation stops (${note})` };
  if (n * 2 < moving.length) return { verdict: "partial", note: `moves only now and then (${note})` };
  return { verdict: "pass", note };
}

// A heuristic from the code: the names of the parts. The frames in the report are what a
// person should check (override when the legs still swing as one piece).
function kneesItem(turn) {
  const code = turn && turn.code ? turn.code.text : "";
  if (!code) return { verdict: "fail", note: "no code" };
  const knee = /knee/i.test(code);
  const upper = /thigh|upper[\s_-]?leg|femur/i.test(code);
  const lower = /shin|calf|lower[\s_-]?leg|tibia/i.test(code);
  const legs = /leg/i.test(code);
  if ((upper && lower) || (knee && (upper || lower))) {
    return { verdict: "pass", note: "separate thigh and shin named in the code (heuristic: check the frames)" };
  }
  if (knee || legs) return { verdict: "partial", note: "legs, but no separate thigh and shin in the code (heuristic: check the frames)" };
  return { verdict: "fail", note: "no legs named in the code (heuristic: check the frames)" };
}

function isClean(turn) {
  return !!(turn && turn.code && turn.render && errorsOf(turn.render).length === 0 &&
    rendersItem(turn.render).verdict !== "fail");
}

// What the model is told after a turn of the WebGL task, or null when there is nothing to fix.
export function repairMessage(turn) {
  if (turn.error) return null;  // a failed request is not the model's fault: stop
  if (!turn.code) {
    return "Your reply did not contain an HTML file. Reply with the complete HTML file in a single ```html code block.";
  }
  const r = turn.render;
  const errors = errorsOf(r);
  if (errors.length) {
    const list = errors.slice(0, 12).map((e) => `- ${e.slice(0, 300)}`).join("\n");
    return "I opened your page in Chromium. The browser console shows these errors:\n" + list + "\n" +
      "Fix them and reply with the complete corrected HTML file in a single ```html code block.";
  }
  if (rendersItem(r).verdict === "fail") {
    return "I opened your page in Chromium. There are no console errors, but the page shows nothing: it stays blank. " +
      "Fix it and reply with the complete corrected HTML file in a single ```html code block.";
  }
  return null;
}

function webglItem(turn, env) {
  const r = turn && turn.render;
  if (!r) return { verdict: "fail", note: "nothing was rendered" };
  const gl = r.contexts.filter((c) => /webgl/i.test(c.type));
  if (gl.some((c) => c.ok)) return { verdict: "pass", note: gl.map((c) => c.type).join(", ") };
  if (gl.length) {
    return env.webgl && env.webgl.ok ? { verdict: "fail", note: `getContext(${gl[0].type}) returned null` }
      : { verdict: "skipped", note: `WebGL is not available in this Chromium (${env.webgl?.reason || "unknown"})` };
  }
  const other = r.contexts.map((c) => c.type).join(", ");
  return { verdict: "fail", note: other ? `only ${other} contexts` : "no WebGL context was requested" };
}

function fpsItem(turn, env) {
  const r = turn && turn.render;
  if (!env.webgl || !env.webgl.ok) return { verdict: "skipped", note: `WebGL is not available in this Chromium (${env.webgl?.reason || "unknown"})` };
  if (!r || r.fps === null || r.fps === undefined) return { verdict: "fail", note: "not measured (nothing rendered)" };
  const gl = r.glFps || 0, raf = r.fps || 0;
  const value = gl > 0 ? gl : raf;
  const note = `${value.toFixed(1)} FPS (${gl > 0 ? "animation frames that drew with WebGL" : "animation frames"}, over ${r.fpsWindowS?.toFixed(1)} s; ${env.webgl.renderer || "software GL"})`;
  if (value <= 0) return { verdict: "fail", note: "no requestAnimationFrame loop ran" };
  if (value >= 20) return { verdict: "pass", note };
  if (value >= 5) return { verdict: "partial", note };
  return { verdict: "fail", note };
}

function repairItem(turns, maxRepairs) {
  const first = turns[0];
  const last = turns[turns.length - 1];
  const errorsFirst = first.render ? errorsOf(first.render).length : null;
  if (isClean(first)) return { verdict: "pass", note: "no repair needed: the first page had no errors and showed something" };
  if (isClean(last)) return { verdict: "pass", note: `fixed in turn ${turns.length} of ${maxRepairs + 1}` };
  const errorsLast = last.render ? errorsOf(last.render).length : null;
  const summary = turns.map((t, i) => `turn ${i + 1}: ${!t.code ? "no code" : `${errorsOf(t.render).length} errors, ${rendersItem(t.render).verdict === "fail" ? "blank" : "shows something"}`}`).join("; ");
  if (turns.length > 1 && errorsFirst !== null && errorsLast !== null && errorsLast < errorsFirst) {
    return { verdict: "partial", note: `fewer errors, not fixed (${summary})` };
  }
  if (turns.length === 1 && maxRepairs > 0 && last.error) return { verdict: "fail", note: `request failed: ${last.error}` };
  return { verdict: "fail", note: `not fixed (${summary})` };
}

function contentItem(r) {
  if (!r) return { verdict: "fail", note: "nothing was rendered" };
  const text = r.text.replace(/\s+/g, " ");
  const want = [["Lisbon", /lisbon/i], ["21°", /21\s*°/], ["Partly cloudy", /partly\s+cloudy/i], ["64%", /64\s*%/],
    ["12 km/h", /12\s*km\s*\/\s*h/i], ["Mon", /\bmon/i], ["Tue", /\btue/i], ["Wed", /\bwed/i]];
  const missing = want.filter(([, re]) => !re.test(text)).map(([w]) => w);
  const found = want.length - missing.length;
  if (!missing.length) return { verdict: "pass", note: "all present" };
  const note = `missing: ${missing.join(", ")}`;
  return { verdict: found * 2 >= want.length ? "partial" : "fail", note };
}

function overlayItem(r) {
  if (!r) return { verdict: "fail", note: "nothing was rendered" };
  return /fps|frames per second/i.test(r.text) ? { verdict: "pass", note: (r.text.match(/[^\n]*(fps|frames per second)[^\n]*/i) || [""])[0].slice(0, 80) }
    : { verdict: "fail", note: "no text with \"FPS\" on the page" };
}

// Judges a task's turns. env: { webgl: {ok, renderer|reason}, repairTurns }. Returns the
// rubric items with their automatic verdicts.
export function judge(task, turns, env) {
  const first = turns[0], last = turns[turns.length - 1];
  const reply = last && last.reply ? last.reply.content : "";
  const item = (id) => {
    switch (`${task.id}/${id}`) {
      case "webgl-scene/code": return codeItem(last);
      case "webgl-scene/webgl": return webglItem(last, env);
      case "webgl-scene/renders": return rendersItem(last.render);
      case "webgl-scene/no-errors": return noErrorsItem(last.render);
      case "webgl-scene/repair": return repairItem(turns, env.repairTurns);
      case "webgl-scene/animates": return animatesItem(last.render);
      case "webgl-scene/fps": return fpsItem(last, env);
      case "webgl-scene/fps-overlay": return overlayItem(last.render);
      case "weather-card/content": return contentItem(first.render);
      case "svg-cyclist/knees": return kneesItem(first);
      case "candy-count/answer":
        return last.reply ? checkCandy(reply) : { verdict: "fail", note: last.error ? `request failed: ${last.error}` : "no reply" };
      case "candy-count/answer-line": {
        if (!last.reply) return { verdict: "fail", note: "no reply" };
        const n = finalNumber(reply);
        if (n && (n.how === "answer-line" || n.how === "boxed")) return { verdict: "pass", note: `from ${n.how}` };
        return n ? { verdict: "partial", note: "no Answer: line; the last number in the reply was taken" }
          : { verdict: "fail", note: "no number in the reply" };
      }
      case "colour-blindness/answer":
        return last.reply ? checkFather(reply) : { verdict: "fail", note: last.error ? `request failed: ${last.error}` : "no reply" };
      case "colour-blindness/mechanism":
        return last.reply && mentionsXLinkage(reply) ? { verdict: "pass", note: "X-linkage or carrier named" }
          : { verdict: "fail", note: "the reply never names the X chromosome, X-linkage or a carrier" };
    }
    switch (id) {
      case "code": return codeItem(first);
      case "renders": return rendersItem(first.render);
      case "no-errors": return noErrorsItem(first.render);
      case "animates": return animatesItem(first.render);
      case "complete": return completeItem(last);
    }
    throw new Error(`no check for ${task.id}/${id}`);
  };
  return task.rubric.map((r) => ({ id: r.id, label: r.label, critical: !!r.critical, ...pick(item(r.id)) }));
}

// The render checks on their own, for the renderer's tests on fixture pages.
export const renderChecks = { renders: rendersItem, noErrors: noErrorsItem, animates: animatesItem, fps: fpsItem, webgl: webglItem };

function pick(x) {
  return { verdict: x.verdict, note: x.note };
}

// The task's verdict from its items: fail when a critical item fails, pass when every item
// that was judged passes, partial otherwise. Skipped items do not count.
export function overallVerdict(items) {
  const judged = items.filter((i) => i.verdict !== "skipped");
  if (judged.some((i) => i.critical && i.verdict === "fail")) return "fail";
  if (judged.every((i) => i.verdict === "pass")) return "pass";
  return "partial";
}

