// Lexer: template source -> a flat list of segments (literal text, `{{ ... }}` output tags and
// `{% ... %}` statement tags with their tokens). Comments `{# ... #}` are dropped and all
// whitespace control is applied here, so the parser never sees it:
//   `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` after it;
//   trim_blocks removes the first newline after a block or comment tag;
//   lstrip_blocks removes spaces and tabs between the start of a line and a block or comment tag;
//   `{%+` / `+%}` turn the last two off for one tag.
// `{% raw %}...{% endraw %}` content becomes literal text. Newlines are normalized to "\n".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/template/value.h"

namespace moetier::text::jinja {

enum class TokenKind { kName, kString, kInt, kFloat, kOp, kEnd };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

enum class SegmentKind { kText, kOutput, kStatement };

struct Segment {
  SegmentKind kind = SegmentKind::kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput / kStatement; always ends with a kEnd token at the closer
  SourcePos pos;              // of the opening delimiter (or of the text)
};

// Hugging Face renders chat templates with trim_blocks and lstrip_blocks on; so do we by default.
struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;  // Jinja2's default drops one final newline
};

Result<std::vector<Segment>> lex_template(std::string_view source, const LexOptions& options);

}  // namespace moetier::text::jinja
