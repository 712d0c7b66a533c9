// The puzzle checkers on crafted answers (lib/puzzles.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkCandy, checkFather, mentionsXLinkage } from "../lib/puzzles.mjs";

test("candy: 21 passes wherever the rule finds it; anything else fails", () => {
  for (const r of ["Answer: 21", "**Answer: 21 candies**", "\\boxed{21}", "6 → 12 → 14 → 21", "I think 29. Answer: 21"]) {
    assert.equal(checkCandy(r).verdict, "pass", r);
  }
  for (const r of ["Answer: 29", "The jar had 29 candies.", "Answer: 29\n(21 is what others say)", "I don't know.", "<think>21</think>Answer: 18"]) {
    assert.equal(checkCandy(r).verdict, "fail", r);
  }
  assert.match(checkCandy("Answer: 29").note, /29 \(from the Answer: line\); expected 21/);
});

test("father: says colour-blind without negation → pass", () => {
  for (const r of [
    "Answer: The father is red-green colour-blind.",
    "Answer: **The father is colorblind**; the mother is a carrier.",
    "Answer: He must be color blind.",
    "Answer: colour-blind (his genotype is X^c Y)",
    "Answer: The father cannot have normal colour vision.",
    "Answer: The father is colour-blind, not the mother.",
    "Answer: the father has red-green colour vision deficiency",
    "The daughter got X^c from both parents. Therefore the father is red-green color blind.",
  ]) assert.equal(checkFather(r).verdict, "pass", r);
});

test("father: negated, about someone else, or no conclusion → fail", () => {
  for (const r of [
    "Alternative Answer Check: …\nSo Father is not colorblind.\nSo this path is dead.",
    "Answer: The father has normal colour vision.",
    "Answer: The mother is colour-blind.",
    "Answer: Nothing can be concluded about the father.",
    "Answer: The father isn't colour-blind; the mother is.",
    "<think>The father is colour-blind.</think>Answer: the father is unaffected",
    "The daughter is colour-blind.",
  ]) assert.equal(checkFather(r).verdict, "fail", r);
});

test("mechanism: X-linkage or carrier named", () => {
  assert.equal(mentionsXLinkage("It is X-linked, so..."), true);
  assert.equal(mentionsXLinkage("the mother is a carrier"), true);
  assert.equal(mentionsXLinkage("465 lines about the mother and father"), false);
});
