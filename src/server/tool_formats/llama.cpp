// Llama 3.x JSON tool calls and the Llama-based Functionary v3.1 / v3.2 forms.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// ---- Llama 3.1 / 3.2 / 3.3: {"name": "fn", "parameters": {...}}, bare or after <|python_tag|>;
// <|python_tag|> followed by plain text is code for the "python" tool (Llama 3.1's ipython).

constexpr std::string_view kPythonTag = "<|python_tag|>";

// Bare JSON is a call only when it starts like one: {"name" or {"type" (white space allowed).
size_t llama3_block_end(std::string_view text, bool final) {
  if (starts_with(text, kPythonTag)) {
    const size_t p = skip_space(text, kPythonTag.size());
    if (p == text.size()) return final ? text.size() : kNeedMore;
    if (text[p] != '{') return final ? text.size() : kNeedMore;  // code: the rest of the reply
    const size_t e = json_value_end(text, p);
    return e == kNeedMore && final ? text.size() : e;
  }
  const size_t p = skip_space(text, 1);
  const std::string_view rest = text.substr(p);
  for (std::string_view key : {std::string_view("\"name\""), std::string_view("\"type\"")}) {
    if (starts_with(rest, key)) {
      const size_t e = json_value_end(text, 0);
      return e == kNeedMore && final ? text.size() : e;
    }
    if (starts_with(key, rest)) return final ? text.size() : kNeedMore;  // "{ \"na" so far
  }
  return 1;  // an ordinary "{"
}

std::optional<std::vector<ToolCall>> parse_llama3(std::string_view block, const std::vector<ToolSpec>* tools) {
  if (starts_with(block, kPythonTag)) {
    const std::string_view rest = trim(block.substr(kPythonTag.size()));
    if (rest.empty()) return std::nullopt;
    if (rest.front() != '{') {
      if (!known_tool(tools, "python")) return std::nullopt;
      return std::vector<ToolCall>{{.name = "python", .arguments = dump(ordered_json{{"code", std::string(rest)}})}};
    }
    block = rest;
  }
  const ordered_json j = parse_json(block);
  if (!j.is_object() || (j.contains("type") && j["type"] != "function")) return std::nullopt;
  // The template always writes "parameters": JSON without arguments is not taken for a call.
  if (!j.contains("parameters") && !j.contains("arguments")) return std::nullopt;
  // Bare JSON must name a function of the request: JSON that merely looks like a call stays content.
  auto call = json_call(j, "name", {"parameters", "arguments"}, tools);
  if (!call) return std::nullopt;
  return std::vector<ToolCall>{std::move(*call)};
}

Result<std::string> llama3_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, "{\"name\": \"" + tool.name + "\", \"parameters\": ", "}");
}

// ---- Functionary v3.2: the prompt ends with ">>>"; the model writes "all\n" + text, or
// "fn\n" + JSON arguments, each further message after another ">>>".

constexpr std::string_view kRecipient = ">>>";

size_t functionary_v32_block_end(std::string_view text, bool final) {
  size_t p = kRecipient.size();
  while (p < text.size() && name_char(text[p])) ++p;
  if (p == text.size()) return final ? text.size() : kNeedMore;
  if (text[p] != '\n' || p == kRecipient.size()) return p;  // not a recipient line
  if (text.substr(kRecipient.size(), p - kRecipient.size()) == "all") return p + 1;
  return opener_then_json_end(text, p + 1, final);
}

std::optional<std::vector<ToolCall>> parse_functionary_v32(std::string_view block, const std::vector<ToolSpec>* tools) {
  const size_t nl = block.find('\n');
  if (nl == std::string_view::npos) return std::nullopt;
  const std::string name(block.substr(kRecipient.size(), nl - kRecipient.size()));
  if (name == "all") return std::vector<ToolCall>{};  // a text message follows: drop the header
  if (name.empty() || !known_tool(tools, name)) return std::nullopt;
  const ordered_json args = parse_json(block.substr(nl + 1));
  if (!args.is_object()) return std::nullopt;
  return std::vector<ToolCall>{{.name = name, .arguments = dump(args)}};
}

Result<std::string> functionary_v32_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, tool.name + "\n", "");
}

// ---- Functionary v3.1 (Llama 3.1 based): <function=fn>{JSON}</function>, and
// <|python_tag|> + code for the python tool.

constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";

size_t functionary_v31_block_end(std::string_view text, bool final) {
  if (starts_with(text, kPythonTag)) return final ? text.size() : kNeedMore;  // code: the rest of the reply
  return through_close(text, kFunctionOpen.size(), kFunctionClose, final);
}

std::optional<std::vector<ToolCall>> parse_functionary_v31(std::string_view block, const std::vector<ToolSpec>* tools) {
  if (starts_with(block, kPythonTag)) {
    const std::string_view code = trim(block.substr(kPythonTag.size()));
    if (code.empty() || !known_tool(tools, "python")) return std::nullopt;
    return std::vector<ToolCall>{{.name = "python", .arguments = dump(ordered_json{{"code", std::string(code)}})}};
  }
  if (!block.ends_with(kFunctionClose)) return std::nullopt;
  const std::string_view inner = block.substr(kFunctionOpen.size(), block.size() - kFunctionOpen.size() - kFunctionClose.size());
  const size_t gt = inner.find('>');
  if (gt == std::string_view::npos || gt == 0) return std::nullopt;
  const std::string name(inner.substr(0, gt));
  for (char c : name) {
    if (!name_char(c)) return std::nullopt;
  }
  const ordered_json args = parse_json(inner.substr(gt + 1));
  if (!args.is_object()) return std::nullopt;
  return std::vector<ToolCall>{{.name = name, .arguments = dump(args)}};
}

Result<std::string> functionary_v31_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, "<function=" + tool.name + ">", "</function>");
}

}  // namespace

FormatDef llama3_format() {
  return {.id = ToolCallFormat::kLlama3Json,
          .name = "Llama 3.x {\"name\": NAME, \"parameters\": {json}}",
          .detect = [](std::string_view s) { return contains(s, "<|start_header_id|>") && contains(s, "\"parameters\": "); },
          .openers = {"{", kPythonTag},
          .block_end = llama3_block_end,
          .parse = parse_llama3,
          .call_grammar = llama3_call,
          .several = false,  // "This model only supports single tool-calls at once!"
          .leading_text_stop = "{"};
}

FormatDef functionary_v32_format() {
  return {.id = ToolCallFormat::kFunctionaryV32,
          .name = "Functionary v3.2 >>>NAME\\n{json}",
          .detect = [](std::string_view s) { return contains(s, ">>>all") && contains(s, "<|start_header_id|>"); },
          .openers = {kRecipient},
          .implicit_prefix = kRecipient,
          .block_end = functionary_v32_block_end,
          .parse = parse_functionary_v32,
          .call_grammar = functionary_v32_call,
          .call_sep = ">>>"};
}

FormatDef functionary_v31_format() {
  return {.id = ToolCallFormat::kFunctionaryV31,
          .name = "Functionary v3.1 <function=NAME>{json}</function>",
          .detect = [](std::string_view s) { return contains(s, "<function=") && contains(s, kPythonTag); },
          .openers = {kFunctionOpen, kPythonTag},
          .block_end = functionary_v31_block_end,
          .parse = parse_functionary_v31,
          .call_grammar = functionary_v31_call,
          .call_sep = "",
          .leading_text_stop = "<function="};
}

}  // namespace moetier::server::tool_format
