// Mistral tool calls: Nemo's JSON list, and the [ARGS] forms of Devstral / Ministral and Mistral Small 3.2.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// ---- Mistral Nemo: [TOOL_CALLS][{"name": "fn", "arguments": {...}, "id": "a1b2c3d4e"}, ...]
// ---- Devstral / Ministral 3: [TOOL_CALLS]fn[ARGS]{...} per call;
// ---- Mistral Small 3.2: [TOOL_CALLS]fn[CALL_ID]a1b2c3d4e[ARGS]{...} per call.

constexpr std::string_view kToolCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

bool mistral_id(const std::string& id) {
  if (id.size() != 9) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// Mistral templates refuse ids other than 9 alphanumerics when the call comes back in the
// next request: derive one from the prefix (unique per request) and the index.
std::string mistral_make_id(std::string_view prefix, size_t index) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : prefix) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  h = (h ^ index) * 1099511628211ull;
  std::string id;
  for (int i = 0; i < 9; ++i, h /= 62) id += kAlnum[h % 62];
  return id;
}

size_t mistral_block_end(std::string_view text, bool final) {
  const size_t p = skip_space(text, kToolCalls.size());
  if (p == text.size()) return final ? text.size() : kNeedMore;
  if (text[p] == '[') return opener_then_json_end(text, kToolCalls.size(), final);
  // fn[ARGS]{...} or fn[CALL_ID]id[ARGS]{...}
  size_t q = p;
  while (q < text.size() && name_char(text[q])) ++q;
  if (q == p) return p;
  std::string_view rest = text.substr(q);
  if (starts_with(rest, kCallId)) {
    q += kCallId.size();
    while (q < text.size() && std::isalnum(static_cast<unsigned char>(text[q]))) ++q;
    rest = text.substr(q);
  } else if (starts_with(kCallId, rest)) {
    return final ? text.size() : kNeedMore;
  }
  if (starts_with(rest, kArgs)) return opener_then_json_end(text, q + kArgs.size(), final);
  if (starts_with(kArgs, rest)) return final ? text.size() : kNeedMore;
  return q;
}

std::optional<std::vector<ToolCall>> parse_mistral(std::string_view block, const std::vector<ToolSpec>* tools) {
  std::string_view s = trim(block.substr(kToolCalls.size()));
  std::vector<ToolCall> calls;
  if (starts_with(s, "[")) {
    const ordered_json j = parse_json(s);
    if (!j.is_array() || j.empty()) return std::nullopt;
    for (const ordered_json& item : j) {
      auto call = json_call(item, "name", {"arguments", "parameters"}, tools);
      if (!call) return std::nullopt;
      if (item.contains("id") && item["id"].is_string() && mistral_id(item["id"].get<std::string>())) {
        call->id = item["id"].get<std::string>();
      }
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  const size_t a = s.find(kArgs);
  if (a == std::string_view::npos || a == 0) return std::nullopt;
  std::string_view head = s.substr(0, a);
  std::string id;
  if (const size_t c = head.find(kCallId); c != std::string_view::npos) {
    id = std::string(head.substr(c + kCallId.size()));
    if (!mistral_id(id)) return std::nullopt;
    head = head.substr(0, c);
  }
  const std::string name(head);
  if (!known_tool(tools, name)) return std::nullopt;
  const ordered_json args = parse_json(s.substr(a + kArgs.size()));
  if (!args.is_object()) return std::nullopt;
  calls.push_back({.id = std::move(id), .name = name, .arguments = dump(args)});
  return calls;
}

Result<std::string> mistral_nemo_call(GrammarContext& g, const ToolSpec& tool) {
  auto args = args_grammar(g, tool);
  if (!args.is_ok()) return args;
  const std::string id = g.out.add_named("mistral-id", "\"\\\"\" [a-zA-Z0-9]{9} \"\\\"\"");
  return fmt::format("{} {} {} {} {}", gbnf_literal("{\"name\": \"" + tool.name + "\", \"arguments\": "), *args,
                     gbnf_literal(", \"id\": "), id, gbnf_literal("}"));
}

Result<std::string> mistral_args_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, "[TOOL_CALLS]" + tool.name + "[ARGS]", "");
}

Result<std::string> mistral_call_id_call(GrammarContext& g, const ToolSpec& tool) {
  auto args = args_grammar(g, tool);
  if (!args.is_ok()) return args;
  return fmt::format("{} [a-zA-Z0-9]{{9}} {} {}", gbnf_literal("[TOOL_CALLS]" + tool.name + "[CALL_ID]"), gbnf_literal("[ARGS]"),
                     *args);
}

}  // namespace

FormatDef mistral_nemo_format() {
  return {.id = ToolCallFormat::kMistralNemo,
          .name = "Mistral Nemo [TOOL_CALLS][{json}]",
          .detect = [](std::string_view s) { return contains(s, kToolCalls); },
          .openers = {kToolCalls},
          .block_end = mistral_block_end,
          .parse = parse_mistral,
          .make_id = mistral_make_id,
          .call_grammar = mistral_nemo_call,
          .calls_begin = "[TOOL_CALLS][",
          .call_sep = ", ",
          .calls_end = "]",
          .leading_text_stop = kToolCalls};
}

FormatDef mistral_args_format() {
  return {.id = ToolCallFormat::kMistralArgs,
          .name = "Mistral/Devstral [TOOL_CALLS]NAME[ARGS]{json}",
          .detect = [](std::string_view s) { return contains(s, kToolCalls) && contains(s, kArgs); },
          .openers = {kToolCalls},
          .block_end = mistral_block_end,
          .parse = parse_mistral,
          .make_id = mistral_make_id,
          .call_grammar = mistral_args_call,
          .call_sep = "",
          .leading_text_stop = kToolCalls};
}

FormatDef mistral_call_id_format() {
  return {.id = ToolCallFormat::kMistralCallId,
          .name = "Mistral Small 3.2 [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}",
          .detect = [](std::string_view s) { return contains(s, kToolCalls) && contains(s, kCallId) && contains(s, kArgs); },
          .openers = {kToolCalls},
          .block_end = mistral_block_end,
          .parse = parse_mistral,
          .make_id = mistral_make_id,
          .call_grammar = mistral_call_id_call,
          .call_sep = "",
          .leading_text_stop = kToolCalls};
}

}  // namespace moetier::server::tool_format
