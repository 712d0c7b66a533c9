// Helpers the tool-call format units (tool_formats/*.cpp) share: text scanning, reading a
// call out of JSON, balanced-JSON block ends, and the grammar of a function's arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/tool_call_formats.h"

namespace moetier::server::tool_format {

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

inline size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// End (one past the closing bracket) of the JSON object or array that starts at s[pos]
// ('{' or '['), or kNeedMore when `s` ends first. Only brackets and strings are tracked: the
// value is checked when the block is parsed.
inline size_t json_value_end(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return kNeedMore;
}

// A block that is `opener`, optional white space, then one JSON object or array. When
// something else follows the opener, the block is the opener alone (and fails to parse).
inline size_t opener_then_json_end(std::string_view text, size_t opener_size, bool final) {
  const size_t p = skip_space(text, opener_size);
  if (p == text.size()) return final ? text.size() : kNeedMore;
  if (text[p] != '{' && text[p] != '[') return opener_size;
  const size_t e = json_value_end(text, p);
  return e == kNeedMore && final ? text.size() : e;
}

// A block from its opener through `close`.
inline size_t through_close(std::string_view text, size_t opener_size, std::string_view close, bool final) {
  const size_t e = text.find(close, opener_size);
  if (e != std::string_view::npos) return e + close.size();
  return final ? text.size() : kNeedMore;
}

inline std::string dump(const nlohmann::ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace); }

inline bool known_tool(const std::vector<ToolSpec>* tools, const std::string& name) {
  if (!tools) return true;
  for (const ToolSpec& t : *tools) {
    if (t.name == name) return true;
  }
  return false;
}

// A call's arguments: an object, or a string holding one ("{}" when absent or null).
inline std::optional<std::string> arguments_text(const nlohmann::ordered_json& j, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_null()) return "{}";
    nlohmann::ordered_json obj = *it;
    if (obj.is_string()) obj = nlohmann::ordered_json::parse(obj.get<std::string>(), nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) return std::nullopt;
    return dump(obj);
  }
  return "{}";
}

// {"<name_key>": "fn", "<args key>": {...}}: a call, or nullopt.
inline std::optional<ToolCall> json_call(const nlohmann::ordered_json& j, const char* name_key, std::initializer_list<const char*> arg_keys,
                                  const std::vector<ToolSpec>* tools) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find(name_key);
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  if (!known_tool(tools, name->get<std::string>())) return std::nullopt;
  auto args = arguments_text(j, arg_keys);
  if (!args) return std::nullopt;
  return ToolCall{.name = name->get<std::string>(), .arguments = std::move(*args)};
}

inline nlohmann::ordered_json parse_json(std::string_view text) { return nlohmann::ordered_json::parse(trim(text), nullptr, false); }

// The grammar of the function's arguments (a JSON object).
inline Result<std::string> args_grammar(GrammarContext& g, const ToolSpec& tool) {
  auto args = g.conv.add_schema(tool.parameters, tool.name + "-args");
  if (!args.is_ok()) return args.status().with_context(fmt::format("function \"{}\" parameters", tool.name));
  return args;
}

// literal(before) ARGS literal(after).
inline Result<std::string> wrapped_args(GrammarContext& g, const ToolSpec& tool, const std::string& before, const std::string& after) {
  auto args = args_grammar(g, tool);
  if (!args.is_ok()) return args;
  std::string body = grammar::gbnf_literal(before) + " " + *args;
  if (!after.empty()) body += " " + grammar::gbnf_literal(after);
  return body;
}

// A character of a function name as the call markup allows it.
inline bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

// The entries of the format table, one per format (tool_formats/<family>.cpp).
FormatDef qwen3_json_format();
FormatDef qwen35_xml_format();
FormatDef llama3_format();
FormatDef functionary_v32_format();
FormatDef functionary_v31_format();
FormatDef mistral_nemo_format();
FormatDef mistral_args_format();
FormatDef mistral_call_id_format();
FormatDef command_r7b_format();
FormatDef deepseek_r1_format();
FormatDef deepseek_v31_format();

}  // namespace moetier::server::tool_format
