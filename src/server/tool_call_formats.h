// The tool-call formats, one table entry each: how a chat template reveals the format, where a
// call starts and ends in generated text, how a call is read, and the grammar that writes one.
// Each family's formats live in one unit under tool_formats/ (qwen, llama, mistral,
// command_r, deepseek); tool_call_formats.cpp lists them in detection order. The generic
// machinery (the streaming parser, the forcing grammar's outer shape) lives in
// tool_calls.cpp and tool_call_grammar.cpp and only ever goes through this table.
//
// A "block" is the text from one of the format's openers to its end (a closing tag, the end
// of a JSON value, or the end of the reply). A block reads as calls, as nothing (a marker the
// format wraps content in, dropped), or fails and stays content.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/gbnf_writer.h"
#include "grammar/json_schema.h"
#include "server/tool_calls.h"

namespace moetier::server::tool_format {

// block_end's answer when the block is not complete yet.
inline constexpr size_t kNeedMore = std::string_view::npos;

struct GrammarContext {
  grammar::GbnfWriter& out;
  grammar::SchemaConverter& conv;
};

struct FormatDef {
  ToolCallFormat id;
  std::string_view name;  // in messages, e.g. "Llama 3.x JSON"
  // Whether a chat template's source teaches this format; formats are tried in table order.
  bool (*detect)(std::string_view template_source);
  // Texts that start a block. The earliest one in the reply wins.
  std::vector<std::string_view> openers;
  // Text the generation prompt ends with that belongs to the first block (Functionary v3.2's
  // ">>>"): read as if the model had written it, never emitted as content.
  std::string_view implicit_prefix;
  // Length of the block that starts `text` (text begins with an opener), or kNeedMore.
  // `final`: no more text will come; then a length is required (all of `text` at most).
  size_t (*block_end)(std::string_view text, bool final);
  // The calls of a complete block (ids left empty unless the format carries them), an empty
  // list for a marker to drop, or nullopt: not a call, the block stays content.
  std::optional<std::vector<ToolCall>> (*parse)(std::string_view block, const std::vector<ToolSpec>* tools);
  // Ids the format constrains (Mistral: 9 alphanumerics); null: id_prefix + index.
  std::string (*make_id)(std::string_view prefix, size_t index) = nullptr;

  // Forcing grammar: begin call (sep call)* end, with `call` an alternative of call_grammar
  // over the allowed functions. Formats that carry one call per reply set several = false.
  Result<std::string> (*call_grammar)(GrammarContext& g, const ToolSpec& tool);
  std::string_view calls_begin, call_sep, calls_end;
  bool several = true;
  // Free text before the calls stops at this (ASCII) text; empty: no leading text possible.
  std::string_view leading_text_stop;
};

// All formats in detection order.
const std::vector<FormatDef>& all();
// The entry of a format other than kNone.
const FormatDef& get(ToolCallFormat format);

}  // namespace moetier::server::tool_format
