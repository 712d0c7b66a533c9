// DeepSeek R1 / V3.1 tool calls.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// ---- DeepSeek R1 (and its distills): <｜tool▁calls▁begin｜> then per call
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>fn\n```json\n{...}\n```<｜tool▁call▁end｜>, then <｜tool▁calls▁end｜>.
// DeepSeek V3.1: <｜tool▁call▁begin｜>fn<｜tool▁sep｜>{...}<｜tool▁call▁end｜> inside the same envelope.

constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>", kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

size_t deepseek_block_end(std::string_view text, bool final) {
  return through_close(text, kDsCallsBegin.size(), kDsCallsEnd, final);
}

std::optional<std::vector<ToolCall>> parse_deepseek(std::string_view block, const std::vector<ToolSpec>* tools) {
  if (!block.ends_with(kDsCallsEnd)) return std::nullopt;
  std::string_view s = block.substr(kDsCallsBegin.size(), block.size() - kDsCallsBegin.size() - kDsCallsEnd.size());
  std::vector<ToolCall> calls;
  for (s = trim(s); !s.empty(); s = trim(s)) {
    if (!starts_with(s, kDsCallBegin)) return std::nullopt;
    s.remove_prefix(kDsCallBegin.size());
    const size_t end = s.find(kDsCallEnd);
    const size_t sep = s.find(kDsSep);
    if (end == std::string_view::npos || sep == std::string_view::npos || sep > end) return std::nullopt;
    std::string name(s.substr(0, sep));
    std::string_view args = s.substr(sep + kDsSep.size(), end - sep - kDsSep.size());
    s.remove_prefix(end + kDsCallEnd.size());
    if (name == "function") {  // R1: the name on the line after the separator, the arguments fenced
      const size_t nl = args.find('\n');
      if (nl == std::string_view::npos) return std::nullopt;
      name = std::string(trim(args.substr(0, nl)));
      args = trim(args.substr(nl + 1));
      if (starts_with(args, "```json")) args.remove_prefix(7);
      else if (starts_with(args, "```")) args.remove_prefix(3);
      if (args.ends_with("```")) args.remove_suffix(3);
    }
    if (name.empty() || !known_tool(tools, name)) return std::nullopt;
    const ordered_json j = parse_json(args);
    if (!j.is_object()) return std::nullopt;
    calls.push_back({.name = name, .arguments = dump(j)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

Result<std::string> deepseek_r1_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, std::string(kDsCallBegin) + "function" + std::string(kDsSep) + tool.name + "\n```json\n",
                      "\n```" + std::string(kDsCallEnd));
}

Result<std::string> deepseek_v31_call(GrammarContext& g, const ToolSpec& tool) {
  return wrapped_args(g, tool, std::string(kDsCallBegin) + tool.name + std::string(kDsSep), std::string(kDsCallEnd));
}

}  // namespace

FormatDef deepseek_r1_format() {
  return {.id = ToolCallFormat::kDeepSeekR1,
          .name = "DeepSeek R1 <｜tool▁calls▁begin｜>",
          .detect = [](std::string_view s) { return contains(s, kDsCallsBegin) && contains(s, "```json"); },
          .openers = {kDsCallsBegin},
          .block_end = deepseek_block_end,
          .parse = parse_deepseek,
          .call_grammar = deepseek_r1_call,
          .calls_begin = kDsCallsBegin,
          .call_sep = "\n",
          .calls_end = kDsCallsEnd};
}

FormatDef deepseek_v31_format() {
  return {.id = ToolCallFormat::kDeepSeekV31,
          .name = "DeepSeek V3.1 <｜tool▁calls▁begin｜>",
          .detect = [](std::string_view s) { return contains(s, kDsCallsBegin); },
          .openers = {kDsCallsBegin},
          .block_end = deepseek_block_end,
          .parse = parse_deepseek,
          .call_grammar = deepseek_v31_call,
          .calls_begin = kDsCallsBegin,
          .call_sep = "",
          .calls_end = kDsCallsEnd};
}

}  // namespace moetier::server::tool_format
