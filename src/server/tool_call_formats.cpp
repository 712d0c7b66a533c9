// The tool-call format table (tool_call_formats.h): one section per format family, after a
// few helpers they share (JSON object reading, balanced-JSON scanning, argument grammars).
#include "server/tool_call_formats.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace moetier::server::tool_format {

namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// End (one past the closing bracket) of the JSON object or array that starts at s[pos]
// ('{' or '['), or kNeedMore when `s` ends first. Only brackets and strings are tracked: the
// value is checked when the block is parsed.
size_t json_value_end(std::string_view s, size_t pos) {
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
size_t opener_then_json_end(std::string_view text, size_t opener_size, bool final) {
  const size_t p = skip_space(text, opener_size);
  if (p == text.size()) return final ? text.size() : kNeedMore;
  if (text[p] != '{' && text[p] != '[') return opener_size;
  const size_t e = json_value_end(text, p);
  return e == kNeedMore && final ? text.size() : e;
}

// A block from its opener through `close`.
size_t through_close(std::string_view text, size_t opener_size, std::string_view close, bool final) {
  const size_t e = text.find(close, opener_size);
  if (e != std::string_view::npos) return e + close.size();
  return final ? text.size() : kNeedMore;
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

bool known_tool(const std::vector<ToolSpec>* tools, const std::string& name) {
  if (!tools) return true;
  for (const ToolSpec& t : *tools) {
    if (t.name == name) return true;
  }
  return false;
}

// A call's arguments: an object, or a string holding one ("{}" when absent or null).
std::optional<std::string> arguments_text(const ordered_json& j, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_null()) return "{}";
    ordered_json obj = *it;
    if (obj.is_string()) obj = ordered_json::parse(obj.get<std::string>(), nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) return std::nullopt;
    return dump(obj);
  }
  return "{}";
}

// {"<name_key>": "fn", "<args key>": {...}}: a call, or nullopt.
std::optional<ToolCall> json_call(const ordered_json& j, const char* name_key, std::initializer_list<const char*> arg_keys,
                                  const std::vector<ToolSpec>* tools) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find(name_key);
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  if (!known_tool(tools, name->get<std::string>())) return std::nullopt;
  auto args = arguments_text(j, arg_keys);
  if (!args) return std::nullopt;
  return ToolCall{.name = name->get<std::string>(), .arguments = std::move(*args)};
}

ordered_json parse_json(std::string_view text) { return ordered_json::parse(trim(text), nullptr, false); }

// The grammar of the function's arguments (a JSON object).
Result<std::string> args_grammar(GrammarContext& g, const ToolSpec& tool) {
  auto args = g.conv.add_schema(tool.parameters, tool.name + "-args");
  if (!args.is_ok()) return args.status().with_context(fmt::format("function \"{}\" parameters", tool.name));
  return args;
}

// literal(before) ARGS literal(after).
Result<std::string> wrapped_args(GrammarContext& g, const ToolSpec& tool, const std::string& before, const std::string& after) {
  auto args = args_grammar(g, tool);
  if (!args.is_ok()) return args;
  std::string body = gbnf_literal(before) + " " + *args;
  if (!after.empty()) body += " " + gbnf_literal(after);
  return body;
}

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

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

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

std::vector<FormatDef> make_table() {
  std::vector<FormatDef> t;
  // Functionary v3.1 also writes "<function=": it goes before Qwen3.5's XML form.
  t.push_back({.id = ToolCallFormat::kFunctionaryV31,
               .name = "Functionary v3.1 <function=NAME>{json}</function>",
               .detect = [](std::string_view s) { return contains(s, "<function=") && contains(s, kPythonTag); },
               .openers = {kFunctionOpen, kPythonTag},
               .block_end = functionary_v31_block_end,
               .parse = parse_functionary_v31,
               .call_grammar = functionary_v31_call,
               .call_sep = "",
               .leading_text_stop = "<function="});
  t.push_back({.id = ToolCallFormat::kQwen35Xml,
               .name = "Qwen3.5/3.6 <tool_call><function=NAME><parameter=P>",
               .detect = [](std::string_view s) { return contains(s, "<function="); },
               .openers = {kToolCallOpen},
               .block_end = tool_call_block_end,
               .parse = parse_qwen35_xml,
               .call_grammar = qwen35_xml_call,
               .call_sep = "\n",
               .leading_text_stop = kToolCallOpen});
  t.push_back({.id = ToolCallFormat::kQwen3Json,
               .name = "Qwen3/Hermes <tool_call>{json}</tool_call>",
               .detect = [](std::string_view s) { return contains(s, kToolCallOpen); },
               .openers = {kToolCallOpen},
               .block_end = tool_call_block_end,
               .parse = parse_qwen3_json,
               .call_grammar = qwen3_json_call,
               .call_sep = "\n",
               .leading_text_stop = kToolCallOpen});
  t.push_back({.id = ToolCallFormat::kFunctionaryV32,
               .name = "Functionary v3.2 >>>NAME\\n{json}",
               .detect = [](std::string_view s) { return contains(s, ">>>all") && contains(s, "<|start_header_id|>"); },
               .openers = {kRecipient},
               .implicit_prefix = kRecipient,
               .block_end = functionary_v32_block_end,
               .parse = parse_functionary_v32,
               .call_grammar = functionary_v32_call,
               .call_sep = ">>>"});
  t.push_back({.id = ToolCallFormat::kLlama3Json,
               .name = "Llama 3.x {\"name\": NAME, \"parameters\": {json}}",
               .detect = [](std::string_view s) { return contains(s, "<|start_header_id|>") && contains(s, "\"parameters\": "); },
               .openers = {"{", kPythonTag},
               .block_end = llama3_block_end,
               .parse = parse_llama3,
               .call_grammar = llama3_call,
               .several = false,  // "This model only supports single tool-calls at once!"
               .leading_text_stop = "{"});
  t.push_back({.id = ToolCallFormat::kMistralCallId,
               .name = "Mistral Small 3.2 [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}",
               .detect = [](std::string_view s) { return contains(s, kToolCalls) && contains(s, kCallId) && contains(s, kArgs); },
               .openers = {kToolCalls},
               .block_end = mistral_block_end,
               .parse = parse_mistral,
               .make_id = mistral_make_id,
               .call_grammar = mistral_call_id_call,
               .call_sep = "",
               .leading_text_stop = kToolCalls});
  t.push_back({.id = ToolCallFormat::kMistralArgs,
               .name = "Mistral/Devstral [TOOL_CALLS]NAME[ARGS]{json}",
               .detect = [](std::string_view s) { return contains(s, kToolCalls) && contains(s, kArgs); },
               .openers = {kToolCalls},
               .block_end = mistral_block_end,
               .parse = parse_mistral,
               .make_id = mistral_make_id,
               .call_grammar = mistral_args_call,
               .call_sep = "",
               .leading_text_stop = kToolCalls});
  t.push_back({.id = ToolCallFormat::kMistralNemo,
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
               .leading_text_stop = kToolCalls});
  t.push_back({.id = ToolCallFormat::kCommandR7B,
               .name = "Command R7B <|START_ACTION|>[{json}]<|END_ACTION|>",
               .detect = [](std::string_view s) { return contains(s, kStartAction) && contains(s, "tool_call_id"); },
               .openers = {kStartAction, kStartResponse, kEndResponse},
               .block_end = command_r7b_block_end,
               .parse = parse_command_r7b,
               .call_grammar = command_r7b_call,
               .calls_begin = "<|START_ACTION|>[\n    ",
               .call_sep = ",\n    ",
               .calls_end = "\n]<|END_ACTION|>",
               .leading_text_stop = kStartAction});
  t.push_back({.id = ToolCallFormat::kDeepSeekR1,
               .name = "DeepSeek R1 <｜tool▁calls▁begin｜>",
               .detect = [](std::string_view s) { return contains(s, kDsCallsBegin) && contains(s, "```json"); },
               .openers = {kDsCallsBegin},
               .block_end = deepseek_block_end,
               .parse = parse_deepseek,
               .call_grammar = deepseek_r1_call,
               .calls_begin = kDsCallsBegin,
               .call_sep = "\n",
               .calls_end = kDsCallsEnd});
  t.push_back({.id = ToolCallFormat::kDeepSeekV31,
               .name = "DeepSeek V3.1 <｜tool▁calls▁begin｜>",
               .detect = [](std::string_view s) { return contains(s, kDsCallsBegin); },
               .openers = {kDsCallsBegin},
               .block_end = deepseek_block_end,
               .parse = parse_deepseek,
               .call_grammar = deepseek_v31_call,
               .calls_begin = kDsCallsBegin,
               .call_sep = "",
               .calls_end = kDsCallsEnd});
  return t;
}

}  // namespace

const std::vector<FormatDef>& all() {
  static const std::vector<FormatDef> table = make_table();
  return table;
}

const FormatDef& get(ToolCallFormat format) {
  for (const FormatDef& f : all()) {
    if (f.id == format) return f;
  }
  return all().front();  // kNone: callers check for it first
}

}  // namespace moetier::server::tool_format
