// A small markdown renderer for the chat page: headings, bold/italic/strikethrough, lists
// (nested, ordered), links, inline code, fenced code blocks (with a copy button), block
// quotes, tables and rules. Safety rule: every piece of the input reaches the output through
// escapeHtml(); the only markup is what this file writes, and a link keeps its address only
// when it is http(s), mailto, a fragment or a path on this server.
// window.moetierMarkdown.render(text) returns an HTML string; an unclosed code fence (a reply
// still streaming) renders as a code block up to the end of the text.
(function () {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const escapeHtml = (s) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

  const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
  const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)/;
  const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}> ?/;
  const TABLE_SEPARATOR = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;

  function safeUrl(url) {
    // Browsers drop tabs, newlines and leading control characters from addresses, which
    // could turn "java\tscript:" into a scheme: refuse any such character outright.
    if (/[\u0000-\u0020\u007f]/.test(url)) return null;
    return /^(https?:\/\/|mailto:|#|\/(?!\/))/i.test(url) ? url : null;
  }

  function link(href, labelHtml) {
    return '<a href="' + escapeHtml(href) + '" target="_blank" rel="noopener noreferrer">' + labelHtml + "</a>";
  }

  // Emphasis on text that is already escaped (the markers are not touched by escaping).
  function emphasis(s) {
    return s
      .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, "$1<strong>$2</strong>")
      .replace(/\*(?=[^\s*])([^*]*?[^\s*])\*/g, "<em>$1</em>")
      .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>")
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>");
  }

  // Inline markup of one block's text. Code spans and links are rendered first and held
  // aside as numbered placeholders, so emphasis inside them is left alone.
  function inline(text) {
    const held = [];
    const hold = (html) => "\u0000" + (held.push(html) - 1) + "\u0000";
    let s = text.replace(/\u0000/g, "");
    s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (m, ticks, code) =>
      hold("<code>" + escapeHtml(code.replace(/^ ([\s\S]*) $/, "$1")) + "</code>"));
    s = s.replace(/\[([^\]\n]+)\]\(([^()\s]+)\)/g, (m, label, url) => {
      const href = safeUrl(url);
      return href ? hold(link(href, emphasis(escapeHtml(label)))) : m;
    });
    s = s.replace(/\bhttps?:\/\/[^\s<>"'`]*[^\s<>"'`.,:;!?)\]]/g, (url) => hold(link(url, escapeHtml(url))));
    s = emphasis(escapeHtml(s));
    return s.replace(/\u0000(\d+)\u0000/g, (m, i) => held[Number(i)]);
  }

  function codeBlock(code, lang) {
    const cls = lang ? ' class="language-' + lang + '"' : "";
    return '<div class="codeblock"><div class="head"><span>' + escapeHtml(lang || "code") +
      '</span><button type="button" class="copy" aria-label="Copy code">Copy</button></div><pre><code' + cls + ">" +
      escapeHtml(code) + "</code></pre></div>";
  }

  function tableCells(line) {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
    return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
  }

  function table(lines, i) {
    const head = tableCells(lines[i]);
    const align = tableCells(lines[i + 1]).map((c) =>
      c.endsWith(":") ? (c.startsWith(":") ? ' class="c"' : ' class="r"') : "");
    const row = (cells, tag) =>
      "<tr>" + head.map((_, k) => "<" + tag + (align[k] || "") + ">" + inline(cells[k] || "") + "</" + tag + ">").join("") + "</tr>";
    let html = "<table><thead>" + row(head, "th") + "</thead><tbody>";
    for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim() !== ""; i++) html += row(tableCells(lines[i]), "td");
    return [html + "</tbody></table>", i];
  }

  const indentOf = (line) => line.length - line.trimStart().length;

  function list(lines, i) {
    const first = LIST_ITEM.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const items = [];
    let loose = false, contentIndent = 0;
    while (i < lines.length) {
      const line = lines[i];
      const m = LIST_ITEM.exec(line);
      if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
        items.push([m[3]]);
        contentIndent = m[1].length + m[2].length + 1;
        i++;
      } else if (line.trim() === "") {
        // A blank line continues the list when what follows still belongs to it.
        const next = lines[i + 1];
        const nextItem = next !== undefined && LIST_ITEM.exec(next);
        const sameList = nextItem && nextItem[1].length === indent && /\d/.test(nextItem[2]) === ordered;
        if (next === undefined || !(indentOf(next) > indent || sameList)) break;
        items[items.length - 1].push("");
        loose = true;
        i++;
      } else if (indentOf(line) > indent) {
        items[items.length - 1].push(line.slice(Math.min(indentOf(line), contentIndent)));
        i++;
      } else {
        break;
      }
    }
    const start = ordered && parseInt(first[2], 10) !== 1 ? ' start="' + parseInt(first[2], 10) + '"' : "";
    const tag = ordered ? "ol" : "ul";
    const body = items.map((item) => "<li>" + blocks(item, !loose) + "</li>").join("");
    return ["<" + tag + start + ">" + body + "</" + tag + ">", i];
  }

  const startsBlock = (line, next) => FENCE.test(line) || HEADING.test(line) || RULE.test(line) ||
    QUOTE.test(line) || LIST_ITEM.test(line) || (line.includes("|") && next !== undefined && TABLE_SEPARATOR.test(next));

  // tight: paragraphs without <p> (the items of a list with no blank lines between them).
  function blocks(lines, tight) {
    const out = [];
    let i = 0, m;
    while (i < lines.length) {
      const line = lines[i];
      if (line.trim() === "") {
        i++;
      } else if ((m = FENCE.exec(line))) {
        const close = new RegExp("^ {0,3}" + (m[1][0] === "`" ? "`" : "~") + "{" + m[1].length + ",}[ \\t]*$");
        const lang = m[2].replace(/[^\w+#.-]/g, "").slice(0, 32);
        const code = [];
        for (i++; i < lines.length && !close.test(lines[i]); i++) code.push(lines[i]);
        i++;
        out.push(codeBlock(code.join("\n"), lang));
      } else if ((m = HEADING.exec(line))) {
        out.push("<h" + m[1].length + ">" + inline(m[2]) + "</h" + m[1].length + ">");
        i++;
      } else if (RULE.test(line)) {
        out.push("<hr>");
        i++;
      } else if (QUOTE.test(line)) {
        const quoted = [];
        for (; i < lines.length && QUOTE.test(lines[i]); i++) quoted.push(lines[i].replace(QUOTE, ""));
        out.push("<blockquote>" + blocks(quoted, false) + "</blockquote>");
      } else if (LIST_ITEM.test(line)) {
        const [html, next] = list(lines, i);
        out.push(html);
        i = next;
      } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1])) {
        const [html, next] = table(lines, i);
        out.push(html);
        i = next;
      } else {
        const para = [line];
        for (i++; i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i], lines[i + 1]); i++) para.push(lines[i]);
        const html = para.map((l) => inline(l.trim())).join("<br>");
        out.push(tight ? html : "<p>" + html + "</p>");
      }
    }
    return out.join("");
  }

  function render(text) {
    return blocks(String(text).replace(/\r\n?/g, "\n").split("\n"), false);
  }

  window.moetierMarkdown = { render, escapeHtml };
})();
