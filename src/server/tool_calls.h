// Tool calls: which format a chat template teaches, validating the request's `tools` /
// `tool_choice`, pulling calls out of generated text (whole or streamed), and a grammar that
// forces calls when tool_choice requires them.
//
// The formats (text the model writes after any <think> block); each one is an entry of the
// table in tool_call_formats.h (code: tool_formats/<family>.cpp), which says how it is
// detected, read and forced:
//   kQwen3Json  (Qwen3, Qwen2.5, Hermes 2 Pro / 3):
//       <tool_call>\n{"name": "fn", "arguments": {...}}\n</tool_call>
//   kQwen35Xml  (Qwen3.5/3.6, Qwen3-Coder; the template contains "<function="):
//       <tool_call>\n<function=fn>\n<parameter=p>\nVALUE\n</parameter>\n</function>\n</tool_call>
//     VALUE is raw text; it becomes JSON through the parameter's schema type: "string" stays
//     a string, anything else is parsed as JSON and kept as a string when that fails.
//   kLlama3Json (Llama 3.1/3.2/3.3): {"name": "fn", "parameters": {...}}, possibly after
//       <|python_tag|>; <|python_tag|> + plain text is code for a tool named "python". Bare
//       JSON counts as a call only when it names a function of the request.
//   kFunctionaryV32: the prompt ends with ">>>"; "fn\n{...}" is a call, "all\n..." text,
//       each next one after ">>>".
//   kFunctionaryV31: <function=fn>{...}</function>, and <|python_tag|> + code.
//   kMistralNemo: [TOOL_CALLS][{"name": "fn", "arguments": {...}, "id": "9 alnum"}, ...]
//   kMistralArgs (Devstral, Ministral 3): [TOOL_CALLS]fn[ARGS]{...}
//   kMistralCallId (Mistral Small 3.2): [TOOL_CALLS]fn[CALL_ID]9 alnum[ARGS]{...}
//   kCommandR7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "fn", "parameters": {...}}]<|END_ACTION|>
//       (the <|START_RESPONSE|> / <|END_RESPONSE|> markers around text are dropped)
//   kDeepSeekR1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>fn\n```json\n{...}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   kDeepSeekV31: the same envelope, <｜tool▁call▁begin｜>fn<｜tool▁sep｜>{...}<｜tool▁call▁end｜> per call
// A block that does not read as a well-formed call stays content.
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

namespace tool_format {
struct FormatDef;  // tool_call_formats.h
}

enum class ToolCallFormat {
  kNone,        // the template knows no tool calls: all text is content
  kQwen3Json,
  kQwen35Xml,
  kLlama3Json,
  kFunctionaryV32,
  kFunctionaryV31,
  kMistralNemo,
  kMistralArgs,
  kMistralCallId,
  kCommandR7B,
  kDeepSeekR1,
  kDeepSeekV31,
};

// From the chat template's source text (the first entry of the format table whose marker
// text the template contains), else kNone.
ToolCallFormat detect_tool_call_format(std::string_view chat_template_source);

// "Llama 3.x {"name": ...}" etc.; for messages.
std::string_view tool_call_format_name(ToolCallFormat format);
// The names of all formats, for an error message.
std::string known_tool_call_formats();

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
  std::string id;         // id_prefix + index within the reply (Mistral: the model's, or 9 alphanumerics)
  std::string name;
  std::string arguments;  // a JSON object as text (compact)
};

struct ToolCallParseOptions {
  ToolCallFormat format = ToolCallFormat::kNone;
  // kQwen35Xml: parameter types; bare-JSON formats (Llama 3.x, Functionary, Mistral, ...):
  // the functions a call may name. May be null (any name).
  const std::vector<ToolSpec>* tools = nullptr;
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
// could start one of the format's openers ("<tool_call>", "[TOOL_CALLS]", "{", ...) is held
// back, and so is a block from its opener until its end arrives; a block's calls are emitted
// when it is complete and well formed (their arguments therefore arrive in one delta, not
// token by token). Markup is never emitted as content unless the block turns out malformed
// or is cut off by finish().
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
  void take_content(size_t n, ToolStreamDelta& out);  // emit and erase buf_'s first n bytes
  void drain(ToolStreamDelta& out, bool final);

  ToolCallParseOptions options_;
  const tool_format::FormatDef* format_ = nullptr;  // null: kNone
  std::string buf_;          // not yet decided
  size_t hidden_ = 0;        // bytes at buf_'s start that the prompt wrote (the format's implicit prefix)
  bool in_block_ = false;    // buf_ starts with an opener
  std::string held_space_;   // white space that may turn out to precede a call
  bool after_call_ = false;  // drop white space until content resumes
  bool content_emitted_ = false;
  size_t n_calls_ = 0;
};

// Grammar for tool_choice "required" or a named function. Output is exactly the call(s):
// one, or with parallel_tool_calls one or more (where the format can carry several), in the
// model's format with arguments that match the function's schema (grammar/json_schema.h).
struct ToolGrammarParams {
  ToolCallFormat format = ToolCallFormat::kQwen3Json;
  const std::vector<ToolSpec>* tools = nullptr;
  ToolChoice choice;
  bool parallel_tool_calls = true;
  // An optional "<think>...</think>" block first (for a prompt that does not already open or
  // close the reasoning; any text without "</think>" inside). When the generation prompt
  // ends inside an open think block, apply the grammar only after "</think>" instead.
  bool allow_think_block = false;
  // The generation prompt ends inside an open think block (DeepSeek R1's templates always
  // open one): the rest of the thought and "</think>" come before the calls.
  bool inside_think = false;
  // Free text before the first call (without the format's opener, e.g. "<tool_call>"); an
  // error for formats where no text can come first (Functionary v3.2, DeepSeek).
  bool allow_leading_text = false;
};

// nullopt for "auto" and "none" (free text: the parser finds any calls; with "none" the
// caller should not parse calls at all). Errors: a format without tool calls, no tools, a
// parameters schema the grammar cannot express (the message names the function).
Result<std::optional<std::string>> build_tool_call_grammar(const ToolGrammarParams& params);

}  // namespace moetier::server
