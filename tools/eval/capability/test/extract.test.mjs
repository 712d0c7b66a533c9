// Code extraction from crafted replies (lib/extract.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { extractCode, stripThinking, answerLine, finalNumber } from "../lib/extract.mjs";

test("an ```html fence is taken, the text around it is not", () => {
  const r = extractCode("Sure!\n```html\n<!DOCTYPE html>\n<html><body><svg></svg></body></html>\n```\nEnjoy.");
  assert.equal(r.code, "<!DOCTYPE html>\n<html><body><svg></svg></body></html>");
  assert.deepEqual([r.kind, r.source, r.complete], ["html", "fence", true]);
});

test("the longest of several page fences wins; ```svg is an SVG", () => {
  const r = extractCode("```svg\n<svg width='10'><circle r='4'/></svg>\n```\nor bigger:\n```svg\n<svg width='99'><rect width='5' height='5'/><circle r='4'/></svg>\n```");
  assert.match(r.code, /width='99'/);
  assert.equal(r.kind, "svg");
});

test("an untagged fence counts when it holds HTML; a ```js fence alone does not", () => {
  assert.equal(extractCode("```\n<div>hi</div>\n```").code, "<div>hi</div>");
  assert.equal(extractCode("```js\nconsole.log('<div>')\n```"), null);
});

test("separate ```css and ```js fences are inlined into a page without <script>", () => {
  const r = extractCode("```html\n<html><head></head><body><div id=a></div></body></html>\n```\n```css\n#a{color:red}\n```\n```javascript\ndocument.getElementById('a').textContent='x';\n```");
  assert.match(r.code, /<style>\n#a\{color:red\}\n<\/style>\n<\/head>/);
  assert.match(r.code, /<script>\ndocument\.getElementById[^]*<\/script>\n<\/body>/);
});

test("a fence cut off by max_tokens is taken to the end and marked incomplete", () => {
  const r = extractCode("```html\n<html><body><canvas></canvas><script>const x = 1");
  assert.equal(r.complete, false);
  assert.match(r.code, /const x = 1$/);
});

test("bare documents and bare <svg> without fences", () => {
  const html = extractCode("Here: <!DOCTYPE html><html><body>x</body></html> That's it.");
  assert.deepEqual([html.code, html.source, html.complete], ["<!DOCTYPE html><html><body>x</body></html>", "bare-html", true]);
  const svg = extractCode("Look: <svg viewBox='0 0 1 1'><path d='M0 0'/></svg>\nDone.");
  assert.deepEqual([svg.code, svg.kind, svg.source], ["<svg viewBox='0 0 1 1'><path d='M0 0'/></svg>", "svg", "bare-svg"]);
});

test("code inside <think> is not the answer; no code gives null", () => {
  assert.equal(extractCode("<think>```html\n<div>draft</div>\n```</think>I can't."), null);
  assert.equal(extractCode("just words, 3 < 4 and a > b"), null);
  assert.equal(stripThinking("<think>unfinished reasoning"), "");
});

test("answer line and final number rules", () => {
  assert.equal(answerLine("blah\n**Answer:** 21 candies"), "21 candies");
  assert.equal(answerLine("Final answer：father"), "father");
  assert.equal(answerLine("no marker"), null);
  assert.deepEqual(finalNumber("... \\boxed{21} and later 3"), { value: 21, how: "boxed" });
  assert.deepEqual(finalNumber("Answer: 29 (not 21)"), { value: 29, how: "answer-line" });
  assert.deepEqual(finalNumber("so 12 + 2 = 14 and 14 * 3 / 2 = 21"), { value: 21, how: "last-number" });
  assert.equal(finalNumber("none"), null);
});
