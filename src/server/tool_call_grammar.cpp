// Validating `tools` / `tool_choice`, and the grammar that forces tool calls
// (tool_choice "required" or a named function). Parsing the calls: tool_calls.cpp.
#include "server/tool_calls.h"

#include <set>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/tool_call_formats.h"

namespace moetier::server {

using nlohmann::ordered_json;

namespace {

// OpenAI allows [a-zA-Z0-9_-]{1,64}; '.' and ':' too, for MCP-style names. Nothing that
// could break the call markup (<, >, quotes, white space).
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<ToolSpec>> parse_tools(const ordered_json& tools) {
  std::vector<ToolSpec> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return Status::bad_input("'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object()) return Status::bad_input(where + " must be an object");
    if (t.contains("type") && t["type"] != "function") {
      return Status::bad_input(fmt::format("{}.type must be \"function\", got {}", where, t["type"].dump()));
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return Status::bad_input(where + ".function must be an object with 'name' and 'parameters'");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return Status::bad_input(where + ".function.name is missing");
    ToolSpec spec{.name = name->get<std::string>()};
    if (!valid_function_name(spec.name)) {
      return Status::bad_input(fmt::format("{}.function.name \"{}\" must be 1-128 characters of a-z, A-Z, 0-9, _ - . :", where, spec.name));
    }
    if (!names.insert(spec.name).second) return Status::bad_input(fmt::format("{}: function \"{}\" is defined twice", where, spec.name));
    auto params = fn->find("parameters");
    if (params == fn->end() || params->is_null()) {
      spec.parameters = {{"type", "object"}, {"properties", ordered_json::object()}};
    } else if (!params->is_object()) {
      return Status::bad_input(where + ".function.parameters must be a JSON schema object");
    } else if (params->contains("type") && (*params)["type"] != "object") {
      return Status::bad_input(fmt::format("{}.function.parameters must have \"type\": \"object\", got {}", where, (*params)["type"].dump()));
    } else if (params->contains("properties") && !(*params)["properties"].is_object()) {
      return Status::bad_input(where + ".function.parameters.properties must be an object");
    } else {
      spec.parameters = *params;
    }
    out.push_back(std::move(spec));
  }
  return out;
}

Result<ToolChoice> parse_tool_choice(const ordered_json& tool_choice, const std::vector<ToolSpec>& tools) {
  if (tool_choice.is_null()) return ToolChoice{};
  if (tool_choice.is_string()) {
    const std::string s = tool_choice.get<std::string>();
    if (s == "auto") return ToolChoice{};
    if (s == "none") return ToolChoice{.mode = ToolChoiceMode::kNone};
    if (s == "required") {
      if (tools.empty()) return Status::bad_input("tool_choice \"required\" needs at least one function in 'tools'");
      return ToolChoice{.mode = ToolChoiceMode::kRequired};
    }
    return Status::bad_input(fmt::format("tool_choice must be \"auto\", \"none\", \"required\" or an object naming a function, got \"{}\"", s));
  }
  if (tool_choice.is_object()) {
    if (tool_choice.contains("type") && tool_choice["type"] != "function") {
      return Status::bad_input("tool_choice.type must be \"function\"");
    }
    auto fn = tool_choice.find("function");
    if (fn == tool_choice.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      return Status::bad_input("tool_choice must look like {\"type\": \"function\", \"function\": {\"name\": \"...\"}}");
    }
    const std::string name = (*fn)["name"].get<std::string>();
    for (const ToolSpec& t : tools) {
      if (t.name == name) return ToolChoice{.mode = ToolChoiceMode::kFunction, .function = name};
    }
    return Status::bad_input(fmt::format("tool_choice names function \"{}\", which is not in 'tools'", name));
  }
  return Status::bad_input("tool_choice must be a string or an object");
}

Result<std::optional<std::string>> build_tool_call_grammar(const ToolGrammarParams& params) {
  using Grammar = std::optional<std::string>;
  if (params.choice.mode == ToolChoiceMode::kAuto || params.choice.mode == ToolChoiceMode::kNone) return Grammar{};
  if (params.format == ToolCallFormat::kNone) {
    return Status::bad_input("tool_choice requires a tool call, but this model's chat template has no tool-call format");
  }
  if (!params.tools || params.tools->empty()) return Status::bad_input("tool_choice requires a tool call, but 'tools' is empty");
  const tool_format::FormatDef& format = tool_format::get(params.format);

  grammar::GbnfWriter out;
  // As llama.cpp's grammars: an object without additionalProperties takes no extra keys, so
  // a forced call holds the declared arguments only. Between the arguments' JSON tokens at
  // most one space or newline: the client gets the arguments re-serialized, so whitespace
  // there is never seen, and a sampler that wanders (a weak or random model) would otherwise
  // spend its token budget on indents and leave the call unclosed.
  grammar::SchemaConverter conv(out, {.max_indent = 0, .extra_properties_by_default = false});
  tool_format::GrammarContext ctx{.out = out, .conv = conv};
  std::vector<std::string> calls;
  for (const ToolSpec& tool : *params.tools) {
    if (params.choice.mode == ToolChoiceMode::kFunction && tool.name != params.choice.function) continue;
    auto body = format.call_grammar(ctx, tool);
    if (!body.is_ok()) return body.status();
    calls.push_back(out.add_rule("call-" + tool.name, *body));
  }
  std::string call_alts;
  for (const std::string& c : calls) call_alts += (call_alts.empty() ? "" : " | ") + c;
  const std::string call = calls.size() == 1 ? calls[0] : out.add_rule("call", call_alts);
  std::string root;
  // Templates close a thought with "</think>\n\n": up to two newlines there (or a space),
  // and no longer runs of whitespace.
  const std::string after_think = out.add_named("after-think", "(\" \" | \"\\n\"{1,2})?");
  if (params.inside_think) {
    root += fmt::format("{} {} {} ", out.add_text_without("think-text", "</think>"), grammar::gbnf_literal("</think>"),
                        after_think);
  } else if (params.allow_think_block) {
    const std::string thought = out.add_text_without("think-text", "</think>");
    root += fmt::format("({} {} {} {})? ", grammar::gbnf_literal("<think>"), thought, grammar::gbnf_literal("</think>"),
                        after_think);
  }
  if (params.allow_leading_text) {
    if (format.leading_text_stop.empty()) {
      return Status::bad_input(fmt::format("the {} tool-call format has no place for text before the calls", format.name));
    }
    root += out.add_text_without("leading-text", format.leading_text_stop) + " ";
  }
  if (!format.calls_begin.empty()) root += grammar::gbnf_literal(format.calls_begin) + " ";
  root += call;
  if (params.parallel_tool_calls && format.several) {
    root += format.call_sep.empty() ? fmt::format(" {}*", call)
                                    : fmt::format(" ({} {})*", grammar::gbnf_literal(format.call_sep), call);
  }
  if (!format.calls_end.empty()) {
    root += ' ';
    root += grammar::gbnf_literal(format.calls_end);
  }
  out.set_root(root);
  return Grammar{out.str()};
}

}  // namespace moetier::server
