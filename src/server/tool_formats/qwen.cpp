// Qwen3 / Qwen2.5 / Hermes JSON and Qwen3.5 / 3.6 / Qwen3-Coder XML tool calls.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// ---- Qwen3 / Qwen2.5 / Hermes 2 Pro: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>

constexpr std::string_view kToolCallOpen = "<tool_call>", kToolCallClose = "</tool_call>";

size_t tool_call_block_end(std::string_view text, bool final) {
  return through_close(text, kToolCallOpen.size(), kToolCallClose, final);
}

std::string_view tool_call_inner(std::string_view block) {
  if (!block.ends_with(kToolCallClose)) return {};
  return block.substr(kToolCallOpen.size(), block.size() - kToolCallOpen.size() - kToolCallClose.size());
}

std::optional<std::vector<ToolCall>> parse_qwen3_json(std::string_view block, const std::vector<ToolSpec>*) {
  // No check against `tools`: the tag leaves no doubt that a call was meant.
  auto call = json_call(parse_json(tool_call_inner(block)), "name", {"arguments", "parameters"}, nullptr);
  if (!call) return std::nullopt;
  return std::vector<ToolCall>{std::move(*call)};
}

Result<std::string> qwen3_json_call(GrammarContext& g, const ToolSpec& tool) {
  // The envelope exactly as the template shows it (json.dumps spacing).
  return wrapped_args(g, tool, "<tool_call>\n{\"name\": \"" + tool.name + "\", \"arguments\": ", "}\n</tool_call>");
}

// ---- Qwen3.5 / 3.6 / Qwen3-Coder: <tool_call>\n<function=fn>\n<parameter=p>\nVALUE\n</parameter>\n</function>\n</tool_call>

// The schema of `param` of function `fn`, or null.
const ordered_json* param_schema(const std::vector<ToolSpec>* tools, const std::string& fn, const std::string& param) {
  if (!tools) return nullptr;
  for (const ToolSpec& t : *tools) {
    if (t.name != fn) continue;
    auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return nullptr;
    auto it = props->find(param);
    return it == props->end() ? nullptr : &*it;
  }
  return nullptr;
}

bool schema_has_type(const ordered_json& schema, const char* type) {
  auto t = schema.find("type");
  if (t == schema.end()) return false;
  if (t->is_string()) return *t == type;
  if (t->is_array()) {
    for (auto& x : *t) if (x == type) return true;
  }
  return false;
}

// A raw <parameter> value as JSON, by the parameter's schema: a string schema (or no schema)
// keeps the text; other types parse it as JSON, keeping the text when that fails.
ordered_json convert_value(std::string value, const ordered_json* schema) {
  if (!schema || !schema->is_object()) return value;
  auto t = schema->find("type");
  const bool plain_string = t != schema->end() && (*t == "string" || (t->is_array() && t->size() == 1 && (*t)[0] == "string"));
  if (plain_string) return value;
  if (t == schema->end() && schema->contains("enum")) {  // enums of strings stay strings
    bool strings = true;
    for (auto& e : (*schema)["enum"]) strings &= e.is_string();
    if (strings) return value;
  }
  ordered_json parsed = ordered_json::parse(value, nullptr, false);
  if (!parsed.is_discarded()) return parsed;
  if (schema_has_type(*schema, "boolean") && (value == "True" || value == "False")) return value == "True";  // Python str()
  return value;
}

std::optional<std::vector<ToolCall>> parse_qwen35_xml(std::string_view block, const std::vector<ToolSpec>* tools) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kParam = "<parameter=", kParamEnd = "</parameter>";
  std::string_view s = trim(tool_call_inner(block));
  if (!starts_with(s, kFn)) return std::nullopt;
  s.remove_prefix(kFn.size());
  const size_t gt = s.find('>');
  if (gt == std::string_view::npos || gt == 0) return std::nullopt;
  ToolCall call{.name = std::string(trim(s.substr(0, gt)))};
  if (call.name.empty() || call.name.find_first_of("<\n") != std::string::npos) return std::nullopt;
  s.remove_prefix(gt + 1);
  ordered_json args = ordered_json::object();
  for (;;) {
    s.remove_prefix(skip_space(s, 0));
    if (starts_with(s, kFnEnd)) {
      s.remove_prefix(kFnEnd.size());
      break;
    }
    if (!starts_with(s, kParam)) return std::nullopt;
    s.remove_prefix(kParam.size());
    const size_t pgt = s.find('>');
    if (pgt == std::string_view::npos || pgt == 0) return std::nullopt;
    const std::string pname(trim(s.substr(0, pgt)));
    if (pname.empty() || pname.find_first_of("<\n") != std::string::npos) return std::nullopt;
    s.remove_prefix(pgt + 1);
    const size_t end = s.find(kParamEnd);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = s.substr(0, end);
    // The template writes "\n" after the opening tag and before the closing one.
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    args[pname] = convert_value(std::string(value), param_schema(tools, call.name, pname));
    s.remove_prefix(end + kParamEnd.size());
  }
  if (!trim(s).empty()) return std::nullopt;
  call.arguments = dump(args);
  return std::vector<ToolCall>{std::move(call)};
}

bool is_string_schema(const ordered_json& s) {
  if (!s.is_object()) return false;
  auto t = s.find("type");
  if (t != s.end()) return *t == "string";
  auto e = s.find("enum");
  if (e == s.end() || !e->is_array() || e->empty()) return false;
  for (auto& v : *e) {
    if (!v.is_string()) return false;
  }
  return true;
}

Result<std::string> qwen35_xml_call(GrammarContext& g, const ToolSpec& tool) {
  // Declared parameters only (required ones first, then optional ones, in declared order);
  // the XML form has no place for additionalProperties.
  std::string body = gbnf_literal("<tool_call>\n<function=" + tool.name + ">\n");
  const ordered_json& schema = tool.parameters;
  static const ordered_json kNoProps = ordered_json::object();
  const ordered_json& props = schema.contains("properties") ? schema["properties"] : kNoProps;
  std::vector<std::string> required;
  if (schema.contains("required") && schema["required"].is_array()) {
    for (auto& r : schema["required"]) if (r.is_string()) required.push_back(r.get<std::string>());
  }
  auto is_required = [&](const std::string& p) { return std::find(required.begin(), required.end(), p) != required.end(); };
  for (const std::string& r : required) {
    if (!props.contains(r)) {
      return Status::bad_input(fmt::format("function \"{}\" parameters: '{}' is required but not in 'properties'", tool.name, r));
    }
  }
  for (bool want_required : {true, false}) {
    for (auto& [pname, pschema] : props.items()) {
      if (is_required(pname) != want_required) continue;
      const std::string phint = tool.name + "-" + pname;
      Result<std::string> value = std::string();
      if (is_string_schema(pschema)) {
        value = g.conv.add_raw_string(pschema, phint, g.out.add_text_without("param-text", "</parameter>"), &schema);
      } else {
        value = g.conv.add_schema(pschema, phint, &schema);
      }
      if (!value.is_ok()) return value.status().with_context(fmt::format("function \"{}\" parameter '{}'", tool.name, pname));
      const std::string param = g.out.add_rule(
          phint + "-param",
          fmt::format("{} {} {}", gbnf_literal("<parameter=" + pname + ">\n"), *value, gbnf_literal("\n</parameter>\n")));
      body += " " + param + (want_required ? "" : "?");
    }
  }
  return body + " " + gbnf_literal("</function>\n</tool_call>");
}

}  // namespace

FormatDef qwen3_json_format() {
  return {.id = ToolCallFormat::kQwen3Json,
          .name = "Qwen3/Hermes <tool_call>{json}</tool_call>",
          .detect = [](std::string_view s) { return contains(s, kToolCallOpen); },
          .openers = {kToolCallOpen},
          .block_end = tool_call_block_end,
          .parse = parse_qwen3_json,
          .call_grammar = qwen3_json_call,
          .call_sep = "\n",
          .leading_text_stop = kToolCallOpen};
}

FormatDef qwen35_xml_format() {
  return {.id = ToolCallFormat::kQwen35Xml,
          .name = "Qwen3.5/3.6 <tool_call><function=NAME><parameter=P>",
          .detect = [](std::string_view s) { return contains(s, "<function="); },
          .openers = {kToolCallOpen},
          .block_end = tool_call_block_end,
          .parse = parse_qwen35_xml,
          .call_grammar = qwen35_xml_call,
          .call_sep = "\n",
          .leading_text_stop = kToolCallOpen};
}

}  // namespace moetier::server::tool_format
