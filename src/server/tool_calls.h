// Tool calls for Qwen models: which format a chat template teaches, validating the request's
// `tools` / `tool_choice`, pulling calls out of generated text (whole or streamed), and a
// grammar that forces calls when tool_choice requires them.
//
// The two formats (text the model writes after any <think> block):
//   kQwen3Json  (Qwen3, Qwen2.5; Hermes style):
//       <tool_call>\n{"name": "fn", "arguments": {...}}\n</tool_call>
//   kQwen35Xml  (Qwen3.5/3.6, Qwen3-Coder; the template contains "<function="):
//       <tool_call>\n<function=fn>\n<parameter=p>\nVALUE\n</parameter>\n</function>\n</tool_call>
//     VALUE is raw text; it becomes JSON through the parameter's schema type: "string" stays
//     a string, anything else is parsed as JSON and kept as a string when that fails.
// Several calls follow one another, separated by "\n".
//
// The parsers run on the answer text after the <think> splitter (text_stream.h): reasoning
// never reaches them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace moetier::server {

enum class ToolCallFormat {
  kNone,        // the template knows no tool calls: all text is content
  kQwen3Json,
  kQwen35Xml,
};

// From the chat template's source text: "<function=" means kQwen35Xml, else "<tool_call>"
// means kQwen3Json, else kNone.
ToolCallFormat detect_tool_call_format(std::string_view chat_template_source);

// One function of the request's `tools`.
struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema of an object; {"type":"object"} when absent
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kFunction };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function;  // kFunction: the name it must call
};

// `tools` (null or absent: none) in OpenAI form [{type:"function", function:{name,
// description, parameters}}]. Errors name the offending entry: not an array, a type other
// than "function", a missing/invalid/duplicate name, parameters that are not an object schema.
Result<std::vector<ToolSpec>> parse_tools(const nlohmann::ordered_json& tools);

// `tool_choice` (null: "auto"): "auto" | "none" | "required" |
// {"type":"function","function":{"name":...}}; the named function must be in `tools`, and
// "required" needs at least one tool.
Result<ToolChoice> parse_tool_choice(const nlohmann::ordered_json& tool_choice, const std::vector<ToolSpec>& tools);

struct ToolCall {
  std::string id;         // id_prefix + index within the reply
  std::string name;
  std::string arguments;  // a JSON object as text (compact)
};

struct ToolCallParseOptions {
  ToolCallFormat format = ToolCallFormat::kNone;
  const std::vector<ToolSpec>* tools = nullptr;  // kQwen35Xml: parameter types; may be null
  std::string id_prefix = "call_";               // make it unique per request, e.g. "call_<request id>_"
};

struct ParsedReply {
  std::string content;               // text outside the calls (see ToolCallStream)
  std::vector<ToolCall> tool_calls;
};

// The whole reply at once. Never fails: a block that is malformed or cut off stays content.
ParsedReply parse_tool_calls(std::string_view text, const ToolCallParseOptions& options);

// OpenAI streaming delta of one call: the first one of a call has id and name (and empty
// arguments), the next one carries the arguments.
struct ToolCallDelta {
  size_t index = 0;
  std::string id;    // first delta only
  std::string name;  // first delta only
  std::string arguments;
  // {"index", "id", "type":"function", "function":{"name","arguments"}} with only the fields
  // this delta has.
  nlohmann::ordered_json to_json() const;
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

// Incremental parser. Content is emitted as soon as it cannot be part of a call: a tail that
// could start "<tool_call>" is held back, and so is everything from "<tool_call>" until its
// "</tool_call>" arrives; a call is emitted when its block is complete and well formed
// (its arguments therefore arrive in one delta, not token by token). Markup is never
// emitted as content unless the block turns out malformed or is cut off by finish().
// White space next to an extracted call is dropped; content after a call that follows
// earlier content is separated from it by one "\n". Concatenating all deltas gives exactly
// parse_tool_calls() on the concatenated text, however the text was split.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallParseOptions options);
  ToolStreamDelta push(std::string_view text);
  ToolStreamDelta finish();
  size_t calls() const { return n_calls_; }

 private:
  void emit_content(std::string_view text, ToolStreamDelta& out);
  void drain(ToolStreamDelta& out);

  ToolCallParseOptions options_;
  std::string buf_;          // not yet decided
  bool in_block_ = false;    // buf_ starts with "<tool_call>"
  std::string held_space_;   // white space that may turn out to precede a call
  bool after_call_ = false;  // drop white space until content resumes
  bool content_emitted_ = false;
  size_t n_calls_ = 0;
};

// Grammar for tool_choice "required" or a named function. Output is exactly the call(s):
// one, or with parallel_tool_calls one or more separated by "\n", each in the model's format
// with arguments that match the function's schema (grammar/json_schema.h).
struct ToolGrammarParams {
  ToolCallFormat format = ToolCallFormat::kQwen3Json;
  const std::vector<ToolSpec>* tools = nullptr;
  ToolChoice choice;
  bool parallel_tool_calls = true;
  // An optional "<think>...</think>" block first (for a prompt that does not already open or
  // close the reasoning; any text without "</think>" inside). When the generation prompt
  // ends inside an open think block, apply the grammar only after "</think>" instead.
  bool allow_think_block = false;
  // Free text (without "<tool_call>") before the first call.
  bool allow_leading_text = false;
};

// nullopt for "auto" and "none" (free text: the parser finds any calls; with "none" the
// caller should not parse calls at all). Errors: a format without tool calls, no tools, a
// parameters schema the grammar cannot express (the message names the function).
Result<std::optional<std::string>> build_tool_call_grammar(const ToolGrammarParams& params);

}  // namespace moetier::server
