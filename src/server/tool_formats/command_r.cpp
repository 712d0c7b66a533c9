// Command R7B tool calls.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// ---- Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "fn", "parameters": {...}}, ...]<|END_ACTION|>;
// text answers come wrapped in <|START_RESPONSE|>...<|END_RESPONSE|> (the markers are dropped).

constexpr std::string_view kStartAction = "<|START_ACTION|>", kEndAction = "<|END_ACTION|>";
constexpr std::string_view kStartResponse = "<|START_RESPONSE|>", kEndResponse = "<|END_RESPONSE|>";

size_t command_r7b_block_end(std::string_view text, bool final) {
  if (starts_with(text, kStartAction)) return through_close(text, kStartAction.size(), kEndAction, final);
  return starts_with(text, kStartResponse) ? kStartResponse.size() : kEndResponse.size();
}

std::optional<std::vector<ToolCall>> parse_command_r7b(std::string_view block, const std::vector<ToolSpec>* tools) {
  if (!starts_with(block, kStartAction)) return std::vector<ToolCall>{};  // a response marker
  if (!block.ends_with(kEndAction)) return std::nullopt;
  const ordered_json j = parse_json(block.substr(kStartAction.size(), block.size() - kStartAction.size() - kEndAction.size()));
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const ordered_json& item : j) {
    auto call = json_call(item, "tool_name", {"parameters"}, tools);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

Result<std::string> command_r7b_call(GrammarContext& g, const ToolSpec& tool) {
  auto args = args_grammar(g, tool);
  if (!args.is_ok()) return args;
  return fmt::format("{} [0-9]{{1,3}} {} {} {}", gbnf_literal("{\"tool_call_id\": \""),
                     gbnf_literal("\", \"tool_name\": \"" + tool.name + "\", \"parameters\": "), *args, gbnf_literal("}"));
}

}  // namespace

FormatDef command_r7b_format() {
  return {.id = ToolCallFormat::kCommandR7B,
          .name = "Command R7B <|START_ACTION|>[{json}]<|END_ACTION|>",
          .detect = [](std::string_view s) { return contains(s, kStartAction) && contains(s, "tool_call_id"); },
          .openers = {kStartAction, kStartResponse, kEndResponse},
          .block_end = command_r7b_block_end,
          .parse = parse_command_r7b,
          .call_grammar = command_r7b_call,
          .calls_begin = "<|START_ACTION|>[\n    ",
          .call_sep = ",\n    ",
          .calls_end = "\n]<|END_ACTION|>",
          .leading_text_stop = kStartAction};
}

}  // namespace moetier::server::tool_format
