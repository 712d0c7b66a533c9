// Getting the code and the final answer out of a model's reply.

// Removes a <think>…</think> block left in the content (servers that do not split the
// reasoning out), including an unterminated one at the start.
export function stripThinking(text) {
  let t = String(text || "");
  t = t.replace(/<think>[\s\S]*?<\/think>/gi, "");
  if (/^\s*<think>/i.test(t)) t = "";  // never closed: everything was reasoning
  return t.replace(/^\s*<\/think>/i, "").trim();
}

const LOOKS_LIKE_PAGE = /<(!doctype\s+html|html[\s>]|svg[\s>]|body[\s>]|canvas[\s>]|div[\s>]|script[\s>])/i;

// The code to render, by this rule (the first that finds something wins):
//  1. fenced blocks (``` or ~~~) tagged html, htm, svg or xml, or untagged/other-tagged ones
//     that contain an HTML or SVG element; of these, the longest; if it has no <script> but a
//     separate ```js/```javascript and a ```css block exist, they are inlined into it;
//  2. an unfenced document: from <!DOCTYPE html> or <html …> to the last </html>;
//  3. an unfenced <svg …>…</svg> (the first opening to the last closing tag).
// An unterminated fence (the reply ran out of tokens) counts up to the end of the reply.
// Returns { code, kind: "html" | "svg", source: "fence" | "bare-html" | "bare-svg",
// complete: whether the fence or the closing tag was there } or null.
export function extractCode(reply) {
  const text = stripThinking(reply);
  const fences = [];
  const re = /(^|\n)[ \t]*(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n([\s\S]*?)(?:\n[ \t]*\2[ \t]*(?=\n|$)|$(?![\s\S]))/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    const closed = /\n[ \t]*(```+|~~~+)[ \t]*$/.test(m[0].replace(/\n+$/, ""));
    fences.push({ lang: m[3].toLowerCase(), body: m[4], closed });
  }
  const pageFences = fences.filter((f) => ["html", "htm", "svg", "xml", "xhtml"].includes(f.lang) ||
    (!["js", "javascript", "css", "json"].includes(f.lang) && LOOKS_LIKE_PAGE.test(f.body)));
  if (pageFences.length) {
    let best = pageFences.reduce((a, b) => (b.body.length > a.body.length ? b : a));
    let code = best.body.trim();
    if (!/<script[\s>]/i.test(code)) {
      const js = fences.filter((f) => f.lang === "js" || f.lang === "javascript").map((f) => f.body).join("\n");
      const css = fences.filter((f) => f.lang === "css").map((f) => f.body).join("\n");
      if (js) code = insertBefore(code, "</body>", `<script>\n${js}\n</script>\n`);
      if (css) code = insertBefore(code, "</head>", `<style>\n${css}\n</style>\n`);
    }
    return { code, kind: kindOf(code), source: "fence", complete: best.closed };
  }
  const doc = text.match(/(<!doctype\s+html[\s\S]*|<html[\s>][\s\S]*)/i);
  if (doc) {
    const end = doc[1].toLowerCase().lastIndexOf("</html>");
    const code = (end >= 0 ? doc[1].slice(0, end + 7) : doc[1]).trim();
    return { code, kind: "html", source: "bare-html", complete: end >= 0 };
  }
  const start = text.search(/<svg[\s>]/i);
  if (start >= 0) {
    const end = text.toLowerCase().lastIndexOf("</svg>");
    const code = (end > start ? text.slice(start, end + 6) : text.slice(start)).trim();
    return { code, kind: "svg", source: "bare-svg", complete: end > start };
  }
  return null;
}

function kindOf(code) {
  return /^\s*(<\?xml[^>]*\?>\s*)?<svg[\s>]/i.test(code) ? "svg" : "html";
}

function insertBefore(code, tag, what) {
  const i = code.toLowerCase().lastIndexOf(tag);
  return i >= 0 ? code.slice(0, i) + what + code.slice(i) : code + "\n" + what;
}

// The "Answer: …" line the prompts ask for: the rest of the line after the last "answer:"
// (any case, also "Final answer:", bold markup around it, a full-width colon). null if none.
export function answerLine(reply) {
  const text = stripThinking(reply);
  const re = /\banswer\s*[*_]*\s*[:：]\s*[*_]*\s*([^\n]*)/gi;
  let m, last = null;
  while ((m = re.exec(text)) !== null) last = m[1];
  if (last === null) return null;
  return last.replace(/[*_`]+/g, "").trim();
}

// The candy puzzle's number, by this rule: the number in the last \boxed{…}; else the first
// number on the last "Answer:" line; else the last number anywhere in the reply. Returns
// { value, how: "boxed" | "answer-line" | "last-number" } or null.
export function finalNumber(reply) {
  const text = stripThinking(reply);
  const boxed = [...text.matchAll(/\\boxed\{\s*([-+]?\d+(?:\.\d+)?)\s*\}/g)];
  if (boxed.length) return { value: Number(boxed[boxed.length - 1][1]), how: "boxed" };
  const line = answerLine(text);
  if (line !== null) {
    const n = line.match(/[-+]?\d+(?:\.\d+)?/);
    if (n) return { value: Number(n[0]), how: "answer-line" };
  }
  const all = text.match(/[-+]?\d+(?:\.\d+)?/g);
  if (all) return { value: Number(all[all.length - 1]), how: "last-number" };
  return null;
}
