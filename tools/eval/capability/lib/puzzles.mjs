// The two logic puzzles' checkers. Each returns { verdict: "pass" | "fail", note } from the
// reply text; the rules are in docs/evaluation.md and tested in test/puzzles.test.mjs.
import { answerLine, finalNumber, stripThinking } from "./extract.mjs";

export const CANDY_ANSWER = 21;

export function checkCandy(reply) {
  const got = finalNumber(reply);
  if (!got) return { verdict: "fail", note: "no number in the reply", value: null, how: null };
  const where = { "boxed": "\\boxed{}", "answer-line": "the Answer: line", "last-number": "the last number in the reply" }[got.how];
  return {
    verdict: got.value === CANDY_ANSWER ? "pass" : "fail",
    note: `${got.value} (from ${where}); expected ${CANDY_ANSWER}`,
    value: got.value,
    how: got.how,
  };
}

// Lower case, American spelling and the ways of writing "colour-blind" made one word.
function normalise(s) {
  return s.toLowerCase()
    .replace(/[*_`]+/g, "")
    .replace(/\bcolor/g, "colour")
    .replace(/colour[\s-]*blind(ness)?/g, "colourblind")
    .replace(/red[\s-]*green\s+colourblind/g, "colourblind")
    .replace(/(red[\s-]*green\s+)?colour[\s-]*vision\s+(deficien\w*|defect\w*)/g, "colourblind")
    .replace(/\bdaltonic\b|\bdaltonism\b/g, "colourblind");
}

const NEGATION = /\b(not|no|never|cannot|can't|isn't|wasn't|doesn't|neither|nor|without)\b|n't\b/;
const NORMAL_VISION = /\bnormal\b|\bunaffected\b|\bhealthy\b/;

// What one clause says about colour blindness: +1 affected, -1 not affected, 0 nothing.
function clauseClaim(clause) {
  const blind = /colourblind|\baffected\b/.test(clause.replace(/\bunaffected\b/g, ""));
  const normal = NORMAL_VISION.test(clause);
  const negated = NEGATION.test(clause);
  if (blind && !normal) return negated ? -1 : 1;
  if (normal && !blind) return negated ? 1 : -1;
  return 0;
}

// The colour-blindness puzzle: the conclusion must say that the father is red-green colour-
// blind. The conclusion is the last "Answer:" line; without one, the last sentence of the
// reply that mentions the father. It is cut into clauses (at . ; , : ( ) and "but"/"while"/
// "whereas"); the clauses about the father must say "colour-blind" without a negation, or "normal
// vision" with one; any such clause saying the opposite fails the answer. When no clause
// names the father, the clauses that name no one else count (the question is about him).
export function checkFather(reply) {
  const text = stripThinking(reply);
  let conclusion = answerLine(text);
  let from = "the Answer: line";
  if (conclusion === null || conclusion === "") {
    const sentences = text.split(/(?<=[.!?])\s+|\n+/).filter((s) => /father|dad\b/i.test(s));
    if (!sentences.length) return { verdict: "fail", note: "no Answer: line and no sentence about the father" };
    conclusion = sentences[sentences.length - 1];
    from = "the last sentence about the father";
  }
  const norm = normalise(conclusion);
  const clauses = norm.split(/[.;,:()]|\bbut\b|\bwhile\b|\bwhereas\b|\band\s+(?=the\s+(?:mother|son|daughter)\b)/).filter((c) => c && c.trim());
  const others = /\b(mother|mom|wife|woman|son|daughter|child|children|boy|girl|she|her)\b/;
  const father = /\b(father|dad|husband|man|he|his)\b/;
  let pos = 0, neg = 0;
  const count = (keep) => {
    for (const c of clauses.filter(keep)) {
      const claim = clauseClaim(c);
      if (claim > 0) ++pos;
      if (claim < 0) ++neg;
    }
  };
  count((c) => father.test(c));
  // The question is about the father: a claim that names no one else is about him.
  if (pos === 0 && neg === 0) count((c) => !others.test(c));
  const quoted = conclusion.length > 160 ? conclusion.slice(0, 157) + "…" : conclusion;
  if (pos > 0 && neg === 0) return { verdict: "pass", note: `${from}: "${quoted}"` };
  if (neg > 0) return { verdict: "fail", note: `${from} says the father is not colour-blind: "${quoted}"` };
  return { verdict: "fail", note: `${from} does not say the father is colour-blind: "${quoted}"` };
}

// Whether the reasoning names the mechanism (the seed's reply never did): X-linked / X
// chromosome / carrier.
export function mentionsXLinkage(reply) {
  return /x[\s-]*(linked|chromosome)|\bx\^?[a-z]?\s*y\b|\bcarrier\b|X\s*\^|X[cC]\b|XᶜY/i.test(stripThinking(reply));
}
