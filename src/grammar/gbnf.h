// GBNF grammars (llama.cpp's syntax, see grammars/README.md there) parsed into a flat form that
// the pushdown matcher (grammar_matcher.h) runs.
//
// Accepted syntax:
//   name ::= alternatives            names: letters, digits, '-' and '_'
//   a b c                            sequence
//   a | b                            alternatives; a newline may follow '|', and (an extension)
//                                    a line may also start with '|' to continue the rule above
//   ( ... )                          grouping; newlines are free inside parentheses
//   "text"                           literal, escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_] [^"\\]                 character class, negated class (same escapes)
//   .                                any code point
//   x*  x+  x?  x{m}  x{m,}  x{m,n}  repetition of the item before (a whole literal counts as one
//                                    item); {,n} means {0,n}
//   # comment                        to the end of the line
//
// Lowering: groups and repetitions become generated rules, named like llama.cpp's
// ("value_3"); a literal becomes one single-code-point CharSet per character. Repetition
// x{m,n} is m copies of x followed by a chain of n-m nested optionals; x* is R ::= x R | "".
//
// Rejected (kBadInput, message "LINE:COL: what"): empty grammar, undefined rule, missing start
// rule, a rule defined twice, unterminated string/class/group, bad escape, invalid UTF-8, a
// reversed class range, bad repetition bounds, left recursion (a rule that can reach itself
// again before consuming any input, except through its own last item, which is a harmless
// loop), and input beyond GrammarLimits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Inclusive range of Unicode code points.
struct CharRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
};

// A set of code points: the union of `ranges`, or its complement when `negated`.
// A literal's character is a one-range set; '.' is an empty negated set.
struct CharSet {
  std::vector<CharRange> ranges;  // sorted by lo, non-overlapping, non-adjacent
  bool negated = false;

  bool contains(uint32_t cp) const;
  // Some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const;
};

enum class ElementKind : uint8_t {
  kChars,  // match one code point from char_sets()[index]
  kRule,   // expand rules()[index]
  kEnd,    // end of an alternative
};

struct Element {
  ElementKind kind = ElementKind::kEnd;
  uint32_t index = 0;
};

struct Rule {
  std::string name;  // as written, or "<user rule>_<n>" for generated ones
  // Where each alternative starts in Grammar::elements(); it runs to the next kEnd.
  std::vector<uint32_t> alternatives;
  bool generated = false;     // made for a group or a repetition
  std::string origin;         // the user rule this one was written in (== name if not generated)
};

// Guards against pathological input; a grammar beyond any of these is rejected (kBadInput).
struct GrammarLimits {
  size_t max_input_bytes = size_t{4} << 20;
  size_t max_rules = size_t{1} << 16;      // user and generated rules together
  size_t max_elements = size_t{1} << 21;   // flat elements after lowering repetitions
  uint32_t max_repetition = 10000;         // m and n in x{m,n}
  int max_nesting = 128;                   // parenthesis depth
};

class Grammar {
 public:
  static Result<Grammar> parse(std::string_view gbnf, std::string_view root = "root",
                               const GrammarLimits& limits = {});

  // All alternatives of all rules, each closed by a kEnd element.
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<CharSet>& char_sets() const { return char_sets_; }
  const std::vector<Rule>& rules() const { return rules_; }
  uint32_t root() const { return root_; }
  std::optional<uint32_t> find_rule(std::string_view name) const;

  // The lowered rules in GBNF-like text, one per line (for debugging and tests).
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  std::vector<Element> elements_;
  std::vector<CharSet> char_sets_;
  std::vector<Rule> rules_;
  uint32_t root_ = 0;
};

}  // namespace moetier::grammar
