// JSON Schema `pattern` (an ECMA-262 regular expression) as a GBNF expression for the
// characters of a string value. Supported: literals, escapes (\d \w \s \D \W \S, \n \t \r
// \f \v \0, \xHH, \uHHHH, escaped punctuation), classes [a-z0-9_] and [^...], '.', groups
// (...) and (?:...) and (?<name>...), alternation, quantifiers * + ? {m} {m,} {m,n} (a
// trailing lazy '?' is accepted: it does not change what matches), and the anchors ^ at the
// very start and $ at the very end. Anything else (lookaround, back-references, \b, \p{..},
// anchors elsewhere) is an error naming the construct: a grammar that silently accepted
// a different language would be worse than a refusal.
//
// JSON Schema patterns are not anchored: "abc" matches any string containing "abc". The
// caller's `any_char` rule (one string character) fills the unanchored sides.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace moetier::grammar {

// How the string's characters appear in the generated text.
enum class StringForm {
  kJson,  // inside a JSON string literal: " \ and control characters are escaped
  kRaw,   // as themselves (e.g. a Qwen3.5 <parameter=...> value)
};

// In kJson form, negated classes, \D \W \S and '.' never produce the escaped forms \" \\ or
// control characters: the grammar then accepts a subset of the pattern's language (every
// string it produces matches the pattern).
Result<std::string> pattern_to_gbnf(std::string_view pattern, StringForm form, std::string_view any_char);

}  // namespace moetier::grammar
